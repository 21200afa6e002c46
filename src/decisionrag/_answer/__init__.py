"""Answers with citations: a chat model answers from the passages a walk ranked."""

from ._answer import Answer, Citation, GenerationUsage
from ._citations import cited_numbers, find_citations, strip_citations
from ._generator import (
    GENERATOR_ENV,
    Generation,
    Generator,
    GeneratorOptions,
    OpenAICompatibleGenerator,
    generator_options,
    load_generator,
)
from ._prompts import TASK_PRESETS, TASKS, Source, Task, build_messages, get_task
from ._run import AnswerEvent, aanswer, answer, astream_answer, prompt_for, stream_answer

__all__ = [
    "GENERATOR_ENV",
    "TASKS",
    "TASK_PRESETS",
    "Answer",
    "AnswerEvent",
    "Citation",
    "Generation",
    "GenerationUsage",
    "Generator",
    "GeneratorOptions",
    "OpenAICompatibleGenerator",
    "Source",
    "Task",
    "aanswer",
    "answer",
    "astream_answer",
    "build_messages",
    "cited_numbers",
    "find_citations",
    "generator_options",
    "get_task",
    "load_generator",
    "prompt_for",
    "stream_answer",
    "strip_citations",
]
