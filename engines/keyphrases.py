"""Key terms and names in a set of sources: what to search for next."""

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from engines.sentences import split_sentences
from graph.models import SearchResult
from tools.text import STOPWORDS, content_words, stem, stems

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
