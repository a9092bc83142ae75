"""Is a source about the research subject? Shared by the planner, the writer and the review.

A source is about the subject when it is the subject's own article, when its title
names the subject, when the subject's own article names it and it names the subject or
shares its vocabulary, or when it names the subject in several sentences. A source that merely
mentions the subject lends only the sentences that name it; a film or novel whose
title takes the subject's name (Bicycle Thieves, Heart of Darkness) lends nothing,
unless the subject is itself a work, a person, a concept or an organisation (which
have works named after them).
"""

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.models import SearchResult
from core.urls import normalize_url
from engines.keyphrases import fold, folded, linked_phrases
from engines.kinds import Kind, kind_of
from engines.sentences import split_sentences
from tools.text import STOPWORDS, cosine, stem, stems, words

# How much a source is about the subject (Relevance.of).
OWN = 1.0  # the subject's own article
TITLED = 0.9  # its title names the subject ("History of Buddhism")
LINKED = 0.8  # the subject's article names it, and it names the subject
DEVOTED = 0.7  # it names the subject in two sentences or more
RELATED = 0.6  # the subject's article names it, and the two share their vocabulary
MENTIONS = 0.4  # it names the subject in passing: only those sentences count
OFF = 0.0
# Sources of these kinds are about the subject through their own works.
_CREATORS: frozenset[Kind | None] = frozenset({"work", "person", "concept", "organisation"})
# Cosine of two articles' word counts above which they share a matter (Forest and
# Deforestation 0.57; Europe and Renaissance 0.05).
SHARED_MATTER = 0.3
# A source the topic names by its title is about the topic when it matches the topic's
# words (BM25 over the collected sources) at least this well against the best such one.
TOPIC_MATCH = 0.5


def subject_tokens(text: str) -> list[str]:
    """Stems of every word, stopwords and single letters kept: "World War I" is not "World War II".

    A follower and the movement are one word here: "Impressionist" and "Impressionism",
    "Buddhist" and "Buddhism" (`_root`).
    """
    return [_root(stem(w)) for w in words(text)]


def _root(token: str) -> str:
    """A stem without "ist" or "ism", when enough is left to tell words apart."""
    for suffix in ("ist", "ism"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 4:
            return token[: -len(suffix)]
    return token


def mentions(text: str, subject: Sequence[str]) -> int:
    """How often `text` names the subject: the exact phrase, or most words of a long subject.

    "The French Revolution of 1830" and "a second French Revolution" name another
    instance of the subject's kind, not the subject.
    """
    tokens = subject_tokens(text)
    if len(subject) <= 4:
        n = len(subject)
        return sum(
            tokens[i : i + n] == list(subject)
            and not (i > 0 and tokens[i - 1] in _ORDINALS)
            and not (
                tokens[i + n : i + n + 1] == ["of"] and _YEAR.fullmatch(_at(tokens, i + n + 1))
            )
            for i in range(len(tokens) - n + 1)
        )
    core = {t for t in subject if t not in STOPWORDS}
    return int(len(core & set(tokens)) >= math.ceil(len(core) * 2 / 3))


_ORDINALS = frozenset({"second", "third", "fourth", "fifth", "sixth", "another", "new"})
_YEAR = re.compile(r"\d{3,4}")


def _at(tokens: Sequence[str], index: int) -> str:
    return tokens[index] if index < len(tokens) else ""


def _significant(text: str) -> list[str]:
    """Stems that tell one name from another: no stopwords, but numbers ("World War I")."""
    return [t for t in subject_tokens(text) if t not in STOPWORDS or _NUMBER.fullmatch(t)]


_NUMBER = re.compile(r"[ivxlc]+|\d+")


def subject_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """The source that is the subject's own article, if one was collected.

    Its title names the subject: the same words, or some of them including a head noun
    (the last word: "Heart" for "the human heart"; of either part of "X and Y"), or all of
    them and a few more names ("William Shakespeare" for "Shakespeare", but not
    "Shakespeare's sonnets": a thing of the subject). Among several, the closest, then
    the best ranked.
    """
    wanted = _significant(subject)
    if not wanted:
        return None
    # The head noun of each part of "X and Y" (the last word of each).
    heads = {part[-1] for part in map(_significant, re.split(r"\s+and\s+", subject)) if part}
    best: tuple[float, int] | None = None
    found: SearchResult | None = None
    for rank, source in enumerate(sources):
        title = _significant(source.title)
        if not title:
            continue
        if set(title) <= set(wanted) and heads & set(title):
            closeness = len(set(title)) / len(set(wanted))
        elif set(wanted) <= set(title) and _adds_only_names(source.title, subject):
            closeness = len(set(wanted)) / len(set(title))
        else:
            continue
        if closeness >= 0.5 and (best is None or (closeness, -rank) > best):
            best, found = (closeness, -rank), source
    return found or _movement_article(subject, sources) or _nearest_article(subject, sources)


def _nearest_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """When no title names the subject ("nuclear reactors"), the article that stands in.

    Its title shares a word with the subject and its text uses every word of it ("Nuclear
    power": "... Reactors producing ..."); among several, the one that uses them most, then
    the best ranked. A subject of one word has no stand-in.
    """
    wanted = set(_significant(subject))
    if len(wanted) < 2:
        return None
    best: tuple[int, int] | None = None
    found: SearchResult | None = None
    for rank, source in enumerate(sources):
        if not wanted & set(_significant(source.title)):
            continue
        text = Counter(_significant(f"{source.title} {source.content}"))
        if not all(text[w] for w in wanted):
            continue
        uses = sum(text[w] for w in wanted)
        if best is None or (uses, -rank) > best:
            best, found = (uses, -rank), source
    return found


# A plural noun of a role: "painters", "philosophers", "scientists", "musicians".
_ROLE = re.compile(r"(?:ers|ists|ians|ors)$")


def group_movement(subject: str) -> str | None:
    """What a group of people is named after, as a query; None for other subjects.

    "Impressionism" for "the French Impressionist painters", "Greek" for "the Greek
    philosophers".
    """
    parts = subject.split()
    if len(parts) < 2 or not _ROLE.search(parts[-1].lower()):
        return None
    nearest = parts[-2]
    return re.sub(r"ists?$", "ism", nearest) if re.search(r"\wists?$", nearest) else nearest


def _movement_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """The article of what makes a group of people one ("the French Impressionist painters").

    Its title is made of the words before the role and has the nearest of them
    ("Impressionism"); among several, the best ranked.
    """
    parts = subject.split()
    if len(parts) < 2 or not _ROLE.search(parts[-1].lower()):
        return None
    modifiers = _significant(" ".join(parts[:-1]))
    if not modifiers:
        return None
    for source in sources:
        title = set(_significant(source.title))
        if title and title <= set(modifiers) and modifiers[-1] in title:
            return source
    return None


def _adds_only_names(title: str, subject: str) -> bool:
    """True when every word `title` adds to `subject` is capitalised (a name's part)."""
    have = set(words(subject))
    return all(
        w[:1].isupper() or w.lower() in STOPWORDS
        for w in re.findall(r"[^\W_]+", bare_title(title))
        if w.lower() not in have
    )


def matching_phrase(subject: str, article: SearchResult | None) -> str:
    """What a source must name to be about the subject.

    The shorter of the subject and the title of its own article (`subject_article`):
    "Heart" for "human heart", "Shakespeare" for "William Shakespeare"; the subject itself
    when no article of it was collected.
    """
    if article is None:
        return subject
    title = article.title
    return title if len(words(title)) < len(words(subject)) else subject


def named_by(article: SearchResult | None, sources: Sequence[SearchResult]) -> frozenset[str]:
    """URLs of the sources whose title the subject's own article names.

    Words are compared without plural endings but not stemmed: "humans" names no
    "Humanism", "lungs" names "Lung".
    """
    if article is None:
        return frozenset()
    text = folded(article.content)
    own_name = set(folded(bare_title(article.title)))
    linked = set()
    for source in sources:
        title = folded(bare_title(source.title))
        # "Silk" is named by "Silk Road" only as part of the subject's own name.
        if source is article or not title or set(title) <= own_name:
            continue
        if _phrase_count(text, title):
            linked.add(normalize_url(source.url))
    return frozenset(linked)


def bare_title(title: str) -> str:
    """A title without its disambiguation: "Lift (force)" -> "Lift"."""
    return re.sub(r"\s*\(.*?\)\s*$", "", title).strip()


def bm25(terms: set[str], sources: Sequence[SearchResult]) -> list[float]:
    """Okapi BM25 of the stemmed `terms` for each source (title counted thrice) in the pool."""
    documents = [Counter(stems(f"{s.title} {s.title} {s.title} {s.content}")) for s in sources]
    if not documents:
        return []
    average = sum(sum(d.values()) for d in documents) / len(documents) or 1.0
    df = Counter(t for d in documents for t in terms if d[t])
    n = len(documents)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    k1, b = 1.2, 0.75
    scores = []
    for d in documents:
        norm = k1 * (1 - b + b * sum(d.values()) / average)
        scores.append(sum(idf[t] * d[t] * (k1 + 1) / (d[t] + norm) for t in terms if d[t]))
    return scores


def named_by_topic(topic: str, sources: Sequence[SearchResult]) -> frozenset[str]:
    """The sources (normalised URLs) whose title the topic names and that match it well.

    However the question is worded, the articles it names ("Tea" and "Coffee" in "tea
    vs coffee", "Mount Everest" in "where is Mount Everest, and who first climbed it")
    are what it is about: the topic names the title (`_named`), and the source matches
    the topic's words (BM25 over the pool) at least `TOPIC_MATCH` as well as the best
    such source does (an article titled by one common word of the topic, "History" in a
    run on the history of a country, matches it far less well).
    """
    terms = set(stems(topic))
    scored = zip(sources, bm25(terms, sources), strict=True)
    titled = [(source, score) for source, score in scored if _named(source, terms)]
    best = max((score for _, score in titled), default=0.0)
    return frozenset(
        normalize_url(source.url) for source, score in titled if score >= TOPIC_MATCH * best > 0
    )


def _named(source: SearchResult, topic: set[str]) -> bool:
    """Whether the topic names the source's title: all its words, or a person's surname.

    "Tolstoy" names Leo Tolstoy; "war" does not name the Spanish Civil War.
    """
    title = stems(bare_title(source.title))
    if not title:
        return False
    if set(title) <= topic:
        return True
    return title[-1] in topic and kind_of(source.content) == "person"


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


def _phrase_count(tokens: Sequence[str], phrase: Sequence[str]) -> int:
    """How often `phrase` occurs in `tokens`, word for word."""
    n, wanted = len(phrase), list(phrase)
    return sum(list(tokens[i : i + n]) == wanted for i in range(len(tokens) - n + 1))


@dataclass
class Relevance:
    """How much each source is about one subject, judged against the sources collected."""

    subject: str
    sources: Sequence[SearchResult]
    # The topic as asked: the articles it names are about it (`named_by_topic`).
    topic: str = ""
    article: SearchResult | None = field(init=False)
    phrase: list[str] = field(init=False)
    kind: Kind | None = field(init=False)
    _linked: frozenset[str] = field(init=False)
    _matter: Counter[str] = field(init=False)
    _topical: frozenset[str] = field(init=False)
    # Judged once per source: the review asks again for every claim that cites it.
    _judged: dict[str, float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.article = subject_article(self.subject, self.sources)
        self.phrase = subject_tokens(matching_phrase(self.subject, self.article))
        self.kind = kind_of(self.article.content) if self.article else None
        self._linked = named_by(self.article, self.sources)
        self._topical = named_by_topic(self.topic, self.sources) if self.topic else frozenset()
        self._matter = (
            Counter(stems(f"{self.article.title} {self.article.content}"))
            if self.article
            else Counter()
        )

    def names(self, text: str) -> bool:
        """True when `text` names the subject."""
        return bool(self.phrase) and mentions(text, self.phrase) > 0

    def of(self, source: SearchResult) -> float:
        """OWN, TITLED, LINKED, DEVOTED, RELATED, MENTIONS or OFF."""
        key = normalize_url(source.url)
        if key not in self._judged:
            self._judged[key] = self._judge(source, key)
        return self._judged[key]

    def _judge(self, source: SearchResult, key: str) -> float:
        judged = self._judge_subject(source, key)
        # The articles the topic names are about it, also where the subject's phrase
        # misses them (a comparison, keywords, a question with two parts).
        if judged < TITLED and key in self._topical:
            return TITLED
        return judged

    def _judge_subject(self, source: SearchResult, key: str) -> float:
        if not self.phrase:
            return MENTIONS
        if self.article is not None and key == normalize_url(self.article.url):
            return OWN
        if self.names(source.title):
            if self.kind not in _CREATORS and kind_of(source.content) == "work":
                return OFF  # a film or novel that takes the subject's name
            return TITLED
        sentences = split_sentences(source.content)
        naming = [i for i, s in enumerate(sentences) if self.names(s)]
        linked = key in self._linked
        if linked and naming:
            return LINKED
        if len(naming) >= 2:
            return DEVOTED
        if linked:
            matter = Counter(stems(f"{source.title} {source.content}"))
            if cosine(self._matter, matter) >= SHARED_MATTER:
                return RELATED
        return MENTIONS if naming else OFF
