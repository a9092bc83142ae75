"""Key terms and names in a set of sources: what to search for next."""

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

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


def key_terms(
    sources: Sequence[SearchResult],
    exclude: set[str],
    limit: int,
    weight: Callable[[SearchResult], float],
) -> list[str]:
    """Return the terms that most characterise the sources about the topic: feedback terms.

    Pseudo-relevance feedback as RM3 weighs it: each source lends a term its share of the
    source's words, times how much the source is about the topic (`weight`), times how rare
    the term is among all the sources; words of the topic (`exclude`) and short ones aside.
    """
    document_frequency: Counter[str] = Counter()
    shares: list[tuple[float, Counter[str]]] = []
    surface: dict[str, str] = {}
    for source in sources:
        counts: Counter[str] = Counter()
        for word in content_words(f"{source.title} {source.content}"):
            token = stem(word)
            surface.setdefault(token, word)
            counts[token] += 1
        document_frequency.update(counts.keys())
        shares.append((weight(source), counts))
    n = len(sources)
    scores: dict[str, float] = defaultdict(float)
    for about, counts in shares:
        total = sum(counts.values()) or 1
        for token, count in counts.items():
            word = surface[token]
            if about > 0 and token not in exclude and not word.isdigit() and len(word) >= 4:
                scores[token] += about * count / total * math.log(1 + n / document_frequency[token])
    # Ties keep the order the terms first appear in (not a set's, which changes per process).
    ranked = sorted(scores, key=lambda t: -scores[t])
    return [surface[t] for t in ranked[:limit]]


# Punctuation that ends a run of words; hyphens and apostrophes stay inside words.
_BREAK = re.compile(r"[^\w'’ -]+")


def linked_phrases(text: str) -> list[str]:
    """Return an article's phrases that may name other articles, in order of appearance.

    Each run of content words between stopwords, numbers, participles, adverbs and
    punctuation is one phrase ("magma chamber"), its last three words at most (the head
    comes last). The lead's naming of the subject and the kind it gives name no other.
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
    """Return whether `word` ends a phrase that may name an article (a verb, adverb, measure).

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
    """Return proper names in the sources: frequent, better-ranked and longer names first.

    A one-word name opening a sentence is skipped: it may be capitalised by position.
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
    """Return phrases of the subject's own article as queries, anchored: "volcano magma chamber".

    Compounds and names first, then the article's order; a phrase is skipped when a source
    of that title is collected or it was searched.
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
