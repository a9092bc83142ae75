"""Key terms and names in a set of sources: what to search for next."""

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from engines.sentences import split_sentences
from graph.models import SearchResult
from tools.text import STOPWORDS, content_words, stem, stems, words

# A run of capitalised words, allowing lower-case joiners inside ("Coup of 18 Brumaire").
_NAME = re.compile(
    r"\b[A-Z][\w'’.-]*[a-z\d][\w'’-]*"
    r"(?:\s+(?:(?:of|the|de|du|la|le|von|van|der)\s+)*[A-Z][\w'’-]*[a-z][\w'’-]*)*"
)
_MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)


def key_terms(sources: Sequence[SearchResult], exclude: set[str], limit: int) -> list[str]:
    """Words found in several sources but not in the topic, most widespread first."""
    document_frequency: Counter[str] = Counter()
    surface: dict[str, str] = {}
    for source in sources:
        seen = set()
        for word in content_words(f"{source.title} {source.content}"):
            token = stem(word)
            if token in exclude or word.isdigit() or len(word) < 4:
                continue
            surface.setdefault(token, word)
            seen.add(token)
        document_frequency.update(seen)
    ranked = [t for t, n in document_frequency.most_common() if n >= 2]
    return [surface[t] for t in ranked[:limit]]


# Punctuation that ends a run of words; hyphens and apostrophes stay inside words.
_BREAK = re.compile(r"[^\w'’ -]+")


def fold(word: str) -> str:
    """A lower-cased word without a plural "s": "vessels" -> "vessel", "glass" stays.

    Lighter than a stem, so "humans" is not "humanism" and "activity" is not "activism".
    """
    lowered = word.lower()
    if len(lowered) > 3 and lowered.endswith("s") and not lowered.endswith(("ss", "us", "is")):
        return lowered[:-1]
    return lowered


def folded(text: str) -> list[str]:
    """Every word of `text`, folded; stopwords kept so phrases compare word for word."""
    return [fold(w) for w in words(text)]


def linked_phrases(text: str) -> list[str]:
    """Phrases of an article that may name other articles, in order of first appearance.

    Each run of content words between stopwords, numbers and punctuation is one phrase
    ("magma chamber", "nuclear fission", "Mahatma Gandhi"); a run longer than three
    words keeps its last three, the head of an English noun phrase being at its end.
    """
    found: list[str] = []
    for sentence in split_sentences(text):
        for piece in _BREAK.split(sentence):
            run: list[str] = []
            for word in [*piece.split(), ""]:
                if word and word.lower() not in STOPWORDS and not word[:1].isdigit():
                    run.append(word)
                    continue
                if run:
                    found.append(" ".join(run[-3:]))
                run = []
    return list(dict.fromkeys(p for p in found if len(p) > 2))


def named_entities(sources: Sequence[SearchResult], exclude: set[str], limit: int) -> list[str]:
    """Proper names in the sources, best first.

    Names mentioned often, in better-ranked sources, and longer names come first. A
    one-word name at the start of a sentence is skipped: it may be capitalised by position.
    """
    counts: defaultdict[str, float] = defaultdict(float)
    for rank, source in enumerate(sources):
        weight = 1.0 / (1 + rank)
        for sentence in split_sentences(source.content):
            for match in _NAME.finditer(sentence):
                name = match.group(0).strip(" .'’-")
                words = name.split()
                if match.start() == 0 and len(words) == 1:
                    continue
                if words[0].lower() in STOPWORDS or words[0].lower() in _MONTHS:
                    continue
                name_stems = set(stems(name))
                if not name_stems or name_stems <= exclude:
                    continue
                counts[name] += weight * (1 + 0.5 * (len(words) - 1))
    return sorted(counts, key=lambda name: counts[name], reverse=True)[:limit]
