"""A tiny random chat causal LM (tokenizer trained here, a 2-layer Llama) saved as a
transformers folder, for tests that need a real model server without downloads."""

from __future__ import annotations

import itertools
import string
from collections.abc import Iterable
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["[UNK]", "[PAD]", "<|im_start|>", "<|im_end|>"]


def labels() -> list[str]:
    """llm2jev's option labels A..Z, AA..ZZ: each must be one token after 'Answer:'."""
    two = ("".join(p) for p in itertools.product(string.ascii_uppercase, repeat=2))
    return [*string.ascii_uppercase, *two]


def build_tiny_chat_lm(folder: Path, texts: Iterable[str], *, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIAL, min_frequency=1)
    tokenizer.train_from_iterator([*texts, " ".join(labels()), "Answer: Yes No user assistant"], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   bos_token="<|im_start|>", eos_token="<|im_end|>")
    fast.chat_template = CHAT_TEMPLATE
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=16_384, pad_token_id=1, bos_token_id=2, eos_token_id=3)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder
