"""The local readout judge on tiny randomly initialised Llama- and Qwen-style models
(WordPiece, byte-level BPE without and with a BOS token).

Each model is built here, saved with a tokenizer to tmp_path and loaded back through
``local:PATH`` exactly as a user's model would be.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import require_module

torch = require_module("torch")
transformers = require_module("transformers")

from decisionrag._embed import default_model_path
from decisionrag._errors import JudgeConfigError, JudgeRequestError
from decisionrag._judges._base import BinaryRequest, ChoiceRequest
from decisionrag._judges._local import LocalJudge, answer_token
from decisionrag._judges._registry import load_judge

CONTEXT = (
    "User question: how do I renew a passport for a child who lives abroad?\n"
    "Page 1: Renew or replace your adult passport\n"
    "Page 2: Get a passport for your child\n"
    "Page 3: Apply for a visa to visit the UK\n"
    "Page 4: Overseas passport applications\n"
    "Page 5: Register a birth abroad"
)
QUESTIONS = (
    *(f"Is the information needed to answer the user's question on Page {n}?" for n in range(1, 6)),
    "Does this passage say yes or no?",
    "Short?",
)

TRAINING_TEXT = [CONTEXT, *QUESTIONS, "Answer (Yes or No): Yes", "Answer (Yes or No): No",
                 "Answer (one letter): A B C D E F G H", "A. B. C. D. E. F. G. H."]


def _byte_level_tokenizer(bos: bool = False) -> transformers.PreTrainedTokenizerFast:
    """A small byte-level BPE tokenizer (GPT-2/Qwen style: ' Yes' carries its space);
    with `bos`, it puts <s> in front of every text (Llama-3 style)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TRAINING_TEXT * 20, trainer=trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
        bos_token="<s>" if bos else None)


def _llama(vocab: int) -> transformers.PreTrainedModel:
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
    )
    return transformers.LlamaForCausalLM(config)


def _qwen(vocab: int) -> transformers.PreTrainedModel:
    config = transformers.Qwen3Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    return transformers.Qwen3ForCausalLM(config)


def _gemma3(vocab: int) -> transformers.PreTrainedModel:
    """Gemma 3's layout: a sliding-window layer (a window shorter than the test's context)
    and a full-attention one."""
    config = transformers.Gemma3TextConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        sliding_window=16, layer_types=["sliding_attention", "full_attention"],
    )
    return transformers.Gemma3ForCausalLM(config)


def _save(tmp_path: Path, style: str) -> Path:
    torch.manual_seed(7)
    if style == "llama":
        tokenizer = transformers.AutoTokenizer.from_pretrained(default_model_path())
        model = _llama(len(tokenizer))
    elif style == "llama-bos":
        tokenizer = _byte_level_tokenizer(bos=True)
        model = _llama(len(tokenizer))
    elif style == "gemma3":
        tokenizer = _byte_level_tokenizer(bos=True)
        model = _gemma3(len(tokenizer))
    else:
        tokenizer = _byte_level_tokenizer()
        model = _qwen(len(tokenizer))
    folder = tmp_path / style
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["llama", "qwen", "llama-bos", "gemma3"])
def judge(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LocalJudge:
    folder = _save(tmp_path_factory.mktemp("models"), request.param)
    loaded = load_judge(f"local:{folder}", device="cpu", max_batch_tokens=40)
    assert isinstance(loaded, LocalJudge)
    return loaded


def test_batched_answers_equal_one_question_at_a_time(judge: LocalJudge) -> None:
    batched = judge.binary_sync(BinaryRequest(CONTEXT, QUESTIONS)).probabilities
    alone = [judge.binary_sync(BinaryRequest(CONTEXT, (q,))).probabilities[0] for q in QUESTIONS]
    assert max(abs(a - b) for a, b in zip(batched, alone, strict=True)) < 1e-4
    assert all(0.0 <= p <= 1.0 for p in batched)
    assert len(set(round(p, 6) for p in batched)) > 1, "different questions should differ"


def test_batched_readout_equals_plain_forward_passes(judge: LocalJudge) -> None:
    """Reference: one ordinary forward pass over context + question, no cache, no mask."""
    batched = judge.binary_sync(BinaryRequest(CONTEXT, QUESTIONS)).probabilities
    context = judge.context_ids(CONTEXT)
    targets = (judge.yes_token, judge.no_token)
    for question, p in zip(QUESTIONS, batched, strict=True):
        logits = judge.plain_readout(context + judge.binary_question_ids(question), targets)
        assert abs(float(torch.softmax(logits, dim=-1)[0]) - p) < 1e-4


def test_questions_are_chunked_and_usage_counts_tokens(judge: LocalJudge) -> None:
    result = judge.binary_sync(BinaryRequest(CONTEXT, QUESTIONS))
    lengths = [len(judge.binary_question_ids(q)) for q in QUESTIONS]
    assert sum(lengths) > judge.max_batch_tokens  # several packed chunks were needed
    assert result.usage.input_tokens == len(judge.context_ids(CONTEXT)) + sum(lengths)
    assert result.usage.requests == 1 and result.usage.seconds > 0


def test_choice_is_a_distribution_and_matches_plain_forward(judge: LocalJudge) -> None:
    options = ("Page 1", "Page 2", "Page 3", "Page 4")
    result = judge.choice_sync(ChoiceRequest(CONTEXT, "Which page answers the question?", options))
    assert len(result.probabilities) == 4
    assert abs(sum(result.probabilities) - 1.0) < 1e-6
    sequence = judge.context_ids(CONTEXT) + judge.choice_question_ids(
        "Which page answers the question?", options)
    reference = torch.softmax(judge.plain_readout(sequence, judge.label_tokens[:4]), dim=-1)
    pairs = zip(reference, result.probabilities, strict=True)
    assert max(abs(float(r) - p) for r, p in pairs) < 1e-4


def test_choice_over_too_many_options_raises(judge: LocalJudge) -> None:
    assert judge.limits.max_options == 26
    options = tuple(f"Page {n}" for n in range(judge.limits.max_options + 1))
    with pytest.raises(JudgeRequestError, match="options"):
        judge.choice_sync(ChoiceRequest(CONTEXT, "Which page?", options))


def test_limits_and_answer_tokens(judge: LocalJudge) -> None:
    assert judge.limits.max_tokens == 512
    assert judge.limits.max_questions is None
    assert judge.yes_token != judge.no_token
    assert answer_token(judge.tokenizer, "Answer (Yes or No):", "Yes") == judge.yes_token
    starts_with_bos = judge.context_ids("x")[0] == judge.tokenizer.bos_token_id
    assert starts_with_bos == judge.name.endswith(("llama-bos", "gemma3"))


def test_too_long_context_is_a_clear_error(judge: LocalJudge) -> None:
    with pytest.raises(JudgeRequestError, match="positions"):
        judge.binary_sync(BinaryRequest(CONTEXT * 60, QUESTIONS[:1]))


def test_missing_model_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(JudgeConfigError):
        load_judge(f"local:{tmp_path / 'absent'}", device="cpu")
    with pytest.raises(JudgeConfigError):
        load_judge("local:")
