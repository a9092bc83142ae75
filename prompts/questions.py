"""Answer prompt: a follow-up question answered from numbered passages only, each sentence cited."""

from collections.abc import Sequence

SYSTEM = """You answer a follow-up question about a research report from the passages you
are given, and from nothing else.

Requirements:
1. Every sentence ends with a footnote naming the passage it comes from: [^n], where n is
   the number the passage is given. Never cite a number you were not given.
2. Say only what the passages say; a fact they do not hold is left out.
3. When the passages do not answer the question, say so in one sentence, without a footnote.
4. Plain prose, at most five sentences, no headings, no references list, no preamble.
   Answer in the language of the question."""


def message(question: str, passages: Sequence[tuple[int, str, str]]) -> str:
    """The user message: the question, then the passages as `[n] title: text`."""
    listed = "\n".join(f"[{n}] {title}: {text}" for n, title, text in passages)
    return f"Question: {question}\n\nPassages:\n{listed}"
