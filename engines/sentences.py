"""Sentence splitting that survives abbreviations, initials and decimals."""

import re

_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft no nos op vol pp ed eds ch sec vs etc e.g i.e cf al approx "
    "ca c fig gen col lt "
    "sgt capt rev gov sen rep inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec "
    "u.s u.k u.n a.d b.c".split()
)
_CITATION_MARK = re.compile(r"\[\d+\]|\[citation needed\]", re.IGNORECASE)
# A sentence this long has most likely lost a full stop where two paragraphs were joined.
RUN_ON_CHARS = 420
# Where: a word in lower case, then a word that opens a sentence ("... period The ancient").
_LOST_STOP = re.compile(r"(?<=[a-z])\s+(?=(?:The|This|These|It|Its|In|He|She|They|His|Her)\s[a-z])")


def _ends_with_abbreviation(chunk: str) -> bool:
    last = chunk.rstrip().rsplit(maxsplit=1)[-1] if chunk.strip() else ""
    word = last.rstrip(".").lstrip("(\"'“")
    # A single capital letter followed by a period is an initial ("J. R. R. Tolkien"),
    # except "I", which ends sentences as a numeral ("World War I.") far more often; a
    # lower-case one is a unit ("3,776 m. It is the highest").
    return word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isupper() and word != "I")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences, joining splits that follow abbreviations or initials."""
    cleaned = _CITATION_MARK.sub("", text)
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n|\n(?=[#*\-\d])", cleaned):
        flat = " ".join(paragraph.split())
        if not flat:
            continue
        pending = ""
        for piece in _BOUNDARY.split(flat):
            pending = f"{pending} {piece}".strip() if pending else piece
            if not _ends_with_abbreviation(pending):
                sentences.append(pending)
                pending = ""
        if pending:
            sentences.append(pending)
    return [part for sentence in sentences for part in _run_on(sentence)]


def _run_on(sentence: str) -> list[str]:
    """Split a sentence too long to be one where a full stop was lost; else keep it whole."""
    if len(sentence) <= RUN_ON_CHARS:
        return [sentence]
    parts, start = [], 0
    for lost in _LOST_STOP.finditer(sentence):
        before = sentence[start : lost.start()].rsplit(maxsplit=1)[-1]
        if before.isalpha() and before.islower():  # not "Zheng He was", "symbol He and"
            parts.append(sentence[start : lost.start()])
            start = lost.end()
    return [*parts, sentence[start:]]


def first_sentence(text: str) -> str:
    """Return the text's first sentence (an encyclopaedia article's definition), or ""."""
    return next(iter(split_sentences(text)), "")
