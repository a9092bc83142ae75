"""Key terms and names in a set of sources: what to search for next."""

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from core.models import SearchResult
from engines.naming import bare_title
from engines.sentences import split_sentences
from tools.text import STOPWORDS, content_words, fold, folded, stem, stems

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
        # In the order the words come, not a set's: ties in `most_common` keep that order,
        # and a set's order changes with every process's hash seed (so would the queries).
        seen: dict[str, None] = {}
        for word in content_words(f"{source.title} {source.content}"):
            token = stem(word)
            if token in exclude or word.isdigit() or len(word) < 4:
                continue
            surface.setdefault(token, word)
            seen[token] = None
        document_frequency.update(seen.keys())
    ranked = [t for t, n in document_frequency.most_common() if n >= 2]
    return [surface[t] for t in ranked[:limit]]


# Punctuation that ends a run of words; hyphens and apostrophes stay inside words.
_BREAK = re.compile(r"[^\w'’ -]+")


def linked_phrases(text: str) -> list[str]:
    """Phrases of an article that may name other articles, in order of first appearance.

    Each run of content words between stopwords, numbers and punctuation is one phrase
    ("magma chamber", "nuclear fission", "Mahatma Gandhi"); a run longer than three
    words keeps its last three, the head of an English noun phrase being at its end.
    Participles and adverbs end a run too ("composed of", "usually"). The first
    sentence's naming of the subject itself ("X, also known as Y and Z, is") and the
    kind it puts the subject in ("is an Indian religion") name no other article.
    """
    found: list[str] = []
    for index, sentence in enumerate(split_sentences(text)):
        skip_genus = False
        if index == 0:
            copula = _COPULA.search(sentence)
            if copula is not None:
                sentence, skip_genus = sentence[copula.end() :], True
        for piece in _BREAK.split(sentence):
            run: list[str] = []
            for word in [*piece.split(), ""]:
                if word and not _ends_run(word, first=sentence.startswith(word)):
                    run.append(word)
                    continue
                if run and not skip_genus:
                    found.append(" ".join(run[-3:]))
                elif run:
                    skip_genus = False
                run = []
    return list(dict.fromkeys(p for p in found if len(p) > 2))


_COPULA = re.compile(r"\s(?:is|was|are|were)\s")
_IRREGULAR_PARTICIPLES = frozenset("known found made led held given seen born built".split())


# Nouns of measure and quantity that name no article of their own.
_GENERIC_NOUNS = frozenset(
    "century centuries year years decade decades part parts number numbers time times "
    "way ways kind kinds type types form forms end beginning rest half lot".split()
)


def _ends_run(word: str, first: bool = False) -> bool:
    """A word no phrase that names an article runs through (verbs, adverbs, measures).

    A capitalised word is part of a name unless it opens the sentence (`first`).
    """
    lowered = word.lower()
    if lowered in STOPWORDS or lowered in _GENERIC_NOUNS or word[:1].isdigit():
        return True
    if not (word[:1].islower() or first):
        return False
    return lowered in _IRREGULAR_PARTICIPLES or (
        len(lowered) > 4 and lowered.endswith(("ed", "ly"))
    )


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


def link_queries(
    article: SearchResult | None,
    subject: str,
    sources: Sequence[SearchResult],
    done: Sequence[str],
    limit: int,
) -> list[str]:
    """Phrases of the subject's own article to search for as subjects of their own.

    What the article names first (its lava and magma, its circulatory system, its
    Buddha) is what a briefing on the subject draws on next; compounds and names come
    first, then the article's order. Each query is the subject and one such
    phrase ("volcano magma chamber"): anchored, never the phrase alone. A phrase is
    skipped when a source of that title is collected or it was searched.
    """
    if article is None or limit <= 0:
        return []
    have = {tuple(folded(bare_title(s.title))) for s in sources}
    named = set(folded(subject)) | set(folded(bare_title(article.title)))
    searched = {q.casefold() for q in done}
    ranked: list[tuple[bool, str]] = []
    for phrase in linked_phrases(article.content):
        rest = [w for w in phrase.split() if fold(w) not in named]
        query = f"{subject} {' '.join(rest)}"
        if not rest or tuple(folded(phrase)) in have or query.casefold() in searched:
            continue
        # A compound or a name ("magma chamber", "the Buddha") is a thing of its own; a
        # single common word ("surface", "average") far less often.
        ranked.append((len(rest) > 1 or rest[0][:1].isupper(), query))
    ranked.sort(key=lambda pair: not pair[0])  # stable: first appearance breaks ties
    return [query for _, query in ranked[:limit]]
