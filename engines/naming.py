"""How a text names a subject, and which articles a topic names by their titles.

Names are compared as words in order ("World War I" is not "World War II"), with case
where it tells names apart; the words that shape a question never name its subject.
"""

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from core.models import SearchResult
from core.urls import normalize_url
from engines.kinds import kind_of
from tools.text import (
    FORM_WORDS,
    STOPWORDS,
    base_form,
    cosine,
    folded,
    movement_forms,
    number_forms,
    stem,
    stems,
    topic_parts,
    word_matches,
    words,
    written_words,
)

# A source that names the subject once is about the topic when it matches the topic's
# words (BM25 over the collected sources) at least this well against the best article the
# topic names (`engines.relevance`).
TOPIC_MATCH = 0.5
# Cosine of word counts above which two articles a topic names share its matter.
SHARED_TOPIC = 0.02
# An article the topic names must match the topic's words at least this well against the
# best such one (BM25 over the pool): "Printing" in a run on ukiyo-e prints does not.
TITLE_MATCH = 0.2
# A title this short ("Go", "Art") is named only as written, capitalised.
SHORT_TITLE = 3


def subject_tokens(text: str) -> list[str]:
    """Return the base form of every word, stopwords and single letters kept ("World War I").

    A follower and the movement are one word here: "Impressionist", "Impressionism".
    """
    return [_root(base_form(w)) for w in words(text)]


def _root(token: str) -> str:
    """Return a follower's word as its movement's: "impressionist" is "impressionism".

    Not the bare root: "social" does not name socialism, nor "existential" existentialism.
    """
    forms = movement_forms(token)
    return forms[0] if forms else token


# A subject of more words is named by most of them, in any order (`mentions`).
LONG_PHRASE = 4


def mentions(text: str, subject: Sequence[str], common: bool = False) -> int:
    """Count how often `text` names the subject: the phrase, or most words of a long subject.

    A coordination names it too ("Greek religion and mythology"); "a second French
    Revolution", "the French Revolution of 1830" and a longer name do not, nor does a
    `common` noun written with a capital inside a sentence ("foes such as the Penguin").
    """
    tokens = subject_tokens(text)
    if len(subject) <= LONG_PHRASE:
        raw = word_matches(text)  # the same words as `tokens`, as written
        return sum(
            not (i > 0 and tokens[i - 1] in _ORDINALS)
            and not (tokens[end : end + 1] == ["of"] and _YEAR.fullmatch(_at(tokens, end + 1)))
            and not _longer_name(raw, end - 1)
            and not (common and _capitalised_alone(raw, i))
            for i, end in _phrase_at(tokens, list(subject))
        )
    core = {t for t in subject if t not in STOPWORDS}
    return int(len(core & set(tokens)) >= math.ceil(len(core) * 2 / 3))


def _phrase_at(tokens: list[str], phrase: list[str]) -> list[tuple[int, int]]:
    """Return where `phrase` starts and ends in `tokens`: word for word, or coordinated.

    "Marie and Pierre Curie" is Marie Curie too: a phrase is also found with one word and a
    conjunction inside it ("and Pierre").
    """
    n, found = len(phrase), []
    for i in range(len(tokens) - n + 1):
        if tokens[i : i + n] == phrase:
            found.append((i, i + n))
            continue
        for split in range(1, n):
            inserted = tokens[i + split : i + split + 2]
            if (
                len(inserted) == 2
                and _coordinated(inserted)
                and tokens[i : i + split] == phrase[:split]
                and tokens[i + split + 2 : i + n + 2] == phrase[split:]
            ):
                found.append((i, i + n + 2))
                break
    return found


def phrase_count(tokens: Sequence[str], phrase: Sequence[str]) -> int:
    """Count how often `phrase` occurs in `tokens`, word for word."""
    n, wanted = len(phrase), list(phrase)
    return sum(list(tokens[i : i + n]) == wanted for i in range(len(tokens) - n + 1))


def _coordinated(inserted: Sequence[str]) -> bool:
    """Return whether two words are a word and a conjunction, in either order ("religion and")."""
    first, second = inserted
    return (first in _CONJUNCTIONS) != (second in _CONJUNCTIONS) and not (
        {first, second} & (STOPWORDS - _CONJUNCTIONS)
    )


_CONJUNCTIONS = frozenset({"and", "or"})


def modifies(title: str, head: str, topic: str) -> bool:
    """Return whether the topic writes `title` just before `head`, as its modifier: "ocean tides".

    A sentence naming an ocean does not name "ocean tides", nor is the Indian Ocean about it.
    """
    return phrase_count(folded(topic), [*folded(title), *folded(head)]) > 0


def common_noun(phrase: Sequence[str], text: str) -> bool:
    """Return whether `text` (the subject's own article) mostly writes `phrase` in lower case.

    "penguins have countershaded plumage": a common noun, so "the Penguin" is another's name.
    """
    return _common_noun(tuple(phrase), text)


@lru_cache(maxsize=4096)  # asked of the same article by every Relevance of a run
def _common_noun(phrase: tuple[str, ...], text: str) -> bool:
    raw = word_matches(text)
    tokens = subject_tokens(text)
    n = len(phrase)
    cases = [
        raw[i].group()[:1].islower()
        for i in range(1, len(tokens) - n + 1)
        if tuple(tokens[i : i + n]) == phrase and "." not in text[raw[i - 1].end() : raw[i].start()]
    ]
    return 2 * sum(cases) > len(cases)


def _capitalised_alone(raw: Sequence[re.Match[str]], i: int) -> bool:
    """Return whether the word at `i` is capitalised inside a sentence, as names are.

    Of a common noun: "foes such as the Penguin" is a name, and so is a plural closing a
    run of capitalised words, as teams and groups are named ("the four Asian Tigers", "the
    Pittsburgh Penguins"); "the Triangulum Galaxy" is a galaxy and "the London Stock
    Exchange" a stock exchange, and a sentence may open with the noun.
    """
    if i == 0 or not raw[i].group()[:1].isupper():
        return False
    before = raw[i - 1]
    if re.search(r"[.!?]", before.string[before.end() : raw[i].start()]):
        return False  # a new sentence
    word = before.group()
    plural_name = raw[i].group().endswith("s") and not _longer_name(raw, i)
    return word[:1].islower() or word.lower() in STOPWORDS or plural_name


def _longer_name(raw: Sequence[re.Match[str]], last: int) -> bool:
    """Return whether the name ending at raw[last] goes on, with a capital or a dash.

    "Muhammad Ali Jinnah" and "Chess Olympiad" name something else than Muhammad Ali and
    chess, "Yi Sun-sin" than the Sun, "Wolf–Rayet star" than the wolf.
    """
    if last + 1 >= len(raw):
        return False
    end, after = raw[last], raw[last + 1]
    between = after.string[end.end() : after.start()]
    if not end.group()[:1].isupper():
        return False
    return between in ("-", "–") or (after.group()[:1].isupper() and between.isspace())


FORM_STEMS = frozenset(stem(w) for w in FORM_WORDS)
_ORDINALS = frozenset({"second", "third", "fourth", "fifth", "sixth", "another", "new"})
_YEAR = re.compile(r"\d{3,4}")


def _at(tokens: Sequence[str], index: int) -> str:
    return tokens[index] if index < len(tokens) else ""


def namesake(title: str, own: str) -> bool:
    """Return whether `title` is another of the name `own`: "Muhammad Ali of Egypt".

    The name must lead and go on with a name: not "History of Buddhism" beside "Buddhism".
    """
    name, rest = bare_title(own), bare_title(title)
    if not name or not rest.startswith(name) or rest == name:
        return False
    after = written_words(rest[len(name) :])
    if after[:1] == ["of"]:
        after = after[1:]
    return bool(after) and after[0][:1].isupper()


def bare_title(title: str) -> str:
    """Return a title without its disambiguation: "Lift (force)" -> "Lift"."""
    return re.sub(r"\s*\(.*?\)\s*$", "", title).strip()


def title_stems(title: str) -> frozenset[str]:
    """Return the stems of a title without its disambiguation: what a point or topic names."""
    return frozenset(stems(bare_title(title)))


def bm25(terms: set[str], sources: Sequence[SearchResult]) -> list[float]:
    """Score each source by Okapi BM25 of the stemmed `terms` (title counted thrice)."""
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
    """Return the sources (normalised URLs) whose title the topic names and that match it well.

    The articles it names ("Tea" and "Coffee" in "tea vs coffee") are what it is about when
    they share a matter (`_coherent`) and match its words at least `TITLE_MATCH` as well as
    the best such one.
    """
    return named_among(topic, sources, bm25(set(stems(topic)), sources))


def named_among(
    topic: str, sources: Sequence[SearchResult], scores: Sequence[float]
) -> frozenset[str]:
    """Return `named_by_topic`, given each source's BM25 match of the topic's words."""
    asked = stems(topic)
    terms = set(asked)
    scored = zip(sources, scores, strict=True)
    written = written_words(topic)
    titled = [(source, score) for source, score in scored if _named(source, terms, written)]
    parts = [part for part in map(stems, topic_parts(topic)) if part]
    titled = _as_written(_coherent(titled, terms, asked, sources, parts), written)
    best = max((score for _, score in titled), default=0.0)
    kept = [
        source
        for source, score in titled
        if (score >= TITLE_MATCH * best > 0 or _heads_a_part(source, parts))
        and not _a_thing_named_as_a_name(source, written)
    ]
    # A word of a longer name the topic writes as one is another thing ("Ali" beside "Muhammad
    # Ali"; what follows "of" may be a subject of its own); "did vaccines end smallpox" still
    # names Smallpox and Vaccine beside "Smallpox vaccine".
    names = [title_stems(s.title) for s in kept]
    compounds = [_compound(bare_title(s.title)) for s in kept]
    written_as_one = [phrase_count(asked, compound) > 0 for compound in compounds]
    return frozenset(
        normalize_url(source.url)
        for source, name in zip(kept, names, strict=True)
        if not any(
            name < other and name <= set(compound) and as_one
            for other, compound, as_one in zip(names, compounds, written_as_one, strict=True)
        )
    )


def _a_thing_named_as_a_name(source: SearchResult, written: Sequence[str]) -> bool:
    """Return whether the topic capitalises a title that its article writes in lower case.

    "Edison or Tesla": the man, not the tesla, a unit its article calls "the tesla".
    """
    title = words(bare_title(source.title))
    n = len(title)
    as_a_name = any(
        [w.lower() for w in written[i : i + n]] == title
        and all(w[:1].isupper() for w in written[i : i + n])
        for i in range(1, len(written) - n + 1)
    )
    return as_a_name and common_noun(subject_tokens(bare_title(source.title)), source.content)


def _as_written(
    titled: list[tuple[SearchResult, float]], written: Sequence[str]
) -> list[tuple[SearchResult, float]]:
    """Drop a titled source named only through an inflection of another's title.

    "jazz vs blues" names Blues as written; Blue, the colour, only as "blues" inflects it.
    """
    said = {w.lower() for w in written}
    as_said = [
        {w for w in words(bare_title(s.title)) if w not in STOPWORDS} <= said for s, _ in titled
    ]
    exact = {title_stems(s.title) for (s, _), yes in zip(titled, as_said, strict=True) if yes}
    return [
        pair
        for pair, yes in zip(titled, as_said, strict=True)
        if yes or title_stems(pair[0].title) not in exact
    ]


def _compound(title: str) -> list[str]:
    """Return the stems of a name's own words: all of it, or what comes before "of"."""
    return stems(re.split(r"\s+of\s+", title, maxsplit=1)[0])


def _coherent(
    titled: list[tuple[SearchResult, float]],
    terms: set[str],
    asked: Sequence[str],
    pool: Sequence[SearchResult],
    parts: Sequence[Sequence[str]],
) -> list[tuple[SearchResult, float]]:
    """Keep the titled sources that share a matter with the one using most of the topic.

    Chess and Go share their vocabulary; Go and dinosaurs hardly a word, so "why did the
    dinosaurs go extinct" names Dinosaur alone. A name of several words that the topic
    writes whole (`asked`, its stems) is named whatever its matter: the steam engine and
    the Industrial Revolution. So is one the other sources found join to the rest of the
    topic (`_joined`): Fermentation, in "bread yeast fermentation", whose own article names
    neither bread nor yeast, where articles on beer and brewing name fermentation and yeast.
    And so is the head of a part the topic joins to another (`parts`, `_heads_a_part`).
    """
    if len(titled) < 2:
        return titled
    words_of = [Counter(stems(f"{s.title} {s.content}")) for s, _ in titled]
    covers = [len(terms & counts.keys()) for counts in words_of]
    anchor = max(range(len(titled)), key=lambda i: (covers[i], titled[i][1]))
    whole = [
        len(t := stems(bare_title(s.title))) > 1 and phrase_count(asked, t) > 0 for s, _ in titled
    ]
    others = [(s.url, set(stems(f"{s.title} {s.content}"))) for s in pool]
    return [
        pair
        for i, pair in enumerate(titled)
        if i == anchor
        or whole[i]
        or _heads_a_part(pair[0], parts)
        or cosine(words_of[anchor], words_of[i]) >= SHARED_TOPIC
        or _joined(pair[0], terms, others)
    ]


def _heads_a_part(source: SearchResult, parts: Sequence[Sequence[str]]) -> bool:
    """Return whether the title is words of a part the topic joins to another, its head too.

    Whatever its vocabulary or its match of the whole topic, the question asks of Slavery
    in "Frederick Douglass and the fight against slavery" (`parts`: the stems of each of
    `topic_parts`); not of Eugenius Warming in "coral reefs and ocean warming".
    """
    title = set(stems(bare_title(source.title)))
    return any(part[-1] in title and title <= set(part) for part in parts)


# Sources of the pool besides its own article that must join a title to the rest of the topic.
JOINED_BY = 2


def _joined(source: SearchResult, terms: set[str], pool: Sequence[tuple[str, set[str]]]) -> bool:
    """Return whether other sources hold the source's title with the topic's other words.

    The topic's words co-occur in what was found: what joins them is evidence, not a guess
    from the title's own article, which may name neither of the others.
    """
    title = set(stems(bare_title(source.title)))
    rest = terms - title
    if not title or not rest:
        return False
    joining = (url for url, held in pool if url != source.url and title <= held and rest & held)
    return sum(1 for _ in joining) >= JOINED_BY


# Endings that inflect a word without making another: "volcanoes", "sinking", "ruled".
_INFLECTIONS = ("s", "es", "'s", "d", "ed", "ing", "ings")


def written_alike(part: str, whole: str) -> bool:
    """Return whether each word of `part` is a word of `whole`, but for an inflection."""
    have = words(whole)
    return all(any(same_word(w, h) for h in have) for w in words(part) if w not in STOPWORDS)


def same_word(a: str, b: str) -> bool:
    """Return whether two words differ only by an inflection; "Titanic" is not "Titan".

    A follower and the movement are one word too: "Impressionist", "Impressionism"; so are
    an irregular noun's numbers: "leaves", "Leaf".
    """
    a, b = a.lower(), b.lower()
    number = number_forms(a)
    if number is not None and number == number_forms(b):
        return True
    movement = movement_forms(a)
    if movement is not None and movement == movement_forms(b):
        return True
    short, long = sorted((a, b), key=len)
    if short.endswith("y") and long in (short[:-1] + "ies", short[:-1] + "ied"):
        return True
    stem = short[:-1] if short.endswith("e") and long.endswith("ing") else short  # "making"
    if not long.startswith(stem):
        return False
    ending = long[len(stem) :]
    if ending[:1] == stem[-1:] and ending[1:] in ("ed", "ing"):  # "stopped", "stopping"
        ending = ending[1:]
    return ending == "" or ending in _INFLECTIONS


# What joins the parts of a topic: "whales and sharks", "tea vs coffee", "X, Y or Z".
_JOINS = re.compile(r"\s*(?:[,;]|\b(?:and|or|versus|vs)\b\.?)\s*", re.IGNORECASE)


def spans_parts(title: str, topic: str) -> bool:
    """Return whether a title takes its words from two parts of a topic that joins them.

    "whales and sharks" names whales and sharks, not the whale shark, a third thing; a
    title that joins its own parts is named as written ("Romeo and Juliet").
    """
    name = bare_title(title)
    if _JOINS.search(name):
        return False
    wanted = set(stems(name))
    parts = [set(stems(part)) for part in _JOINS.split(topic)]
    # A word the parts share is no split: "steam engine vs internal combustion engine".
    return not any(wanted <= part for part in parts) and sum(bool(wanted & p) for p in parts) > 1


def _named(source: SearchResult, topic: set[str], written: Sequence[str]) -> bool:
    """Return whether the topic names the source's title: all its words, or a person's surname.

    "Tolstoy" names Leo Tolstoy; "Muhammad Ali" does not name Husayn ibn Ali (it is longer).
    """
    title = stems(bare_title(source.title))
    if not set(title) - FORM_STEMS:  # "Work (physics)" in "how GPS works", "Life", "History"
        return False
    if set(title) <= topic:
        # Word for word, a plural aside: the stemmer makes one of "capitalism" and "Capital".
        joined = " ".join(written)
        return written_alike(bare_title(source.title), joined) and not spans_parts(
            source.title, joined
        )
    if title[-1] not in topic or kind_of(source.content) != "person":
        return False
    if not ends_with_surname(source.title):
        return False
    if words(bare_title(source.title))[-2:-1] == ["the"]:
        return False  # an epithet is no surname: "great" does not name Herod the Great
    # Where the topic writes the surname inside a longer name, all of it is the title's.
    name = set(title)
    for start, word in enumerate(written):
        if stem(word.lower()) != title[-1]:
            continue
        run = [word]
        for step in (-1, 1):
            at = start + step
            while 0 <= at < len(written) and written[at][:1].isupper():
                if written[at].lower() in STOPWORDS:
                    break
                run.append(written[at])
                at += step
        if any(stem(w.lower()) not in name for w in run):
            return False
    return True


def ends_with_surname(title: str) -> bool:
    """Return whether a person's title may end with a surname: not with a realm.

    "Alexander I of Russia" bears no surname "Russia", nor is named by it.
    """
    return "of" not in words(bare_title(title))


def surnames(titles: set[str], sources: Sequence[SearchResult]) -> dict[str, set[str]]:
    """Return the surnames of the people among `titles` that no other collected person bears.

    "Curie" names neither Marie nor Pierre Curie when both were collected.
    """
    people = {
        bare_title(s.title): words(bare_title(s.title))
        for s in sources
        if len(words(bare_title(s.title))) > 1
        and ends_with_surname(s.title)
        and kind_of(s.content) == "person"
    }
    bearers = Counter(name[-1] for name in people.values())
    return {
        people[t][-1]: set(people[t])
        for t in titles
        if t in people and bearers[people[t][-1]] == 1 and len(people[t][-1]) > SHORT_TITLE
    }


def by_surname(text: str, surname: str, name: set[str]) -> bool:
    """Return whether `text` names the person by the surname, not inside another's name."""
    for found in re.finditer(rf"\b{re.escape(surname)}\b", text, re.IGNORECASE):
        if not found.group()[:1].isupper():
            continue
        before = re.findall(r"[\w'’-]+", text[: found.start()])[-1:]
        if not before or not before[0][:1].isupper() or before[0].lower() in name | STOPWORDS:
            return True  # not "Pierre Curie" for Marie Curie; "When Curie" is hers
    return False
