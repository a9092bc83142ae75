"""Is a source about the research subject? Shared by the planner, the writer and the review.

The grades run from the subject's own article through titles, links and repeated mentions
down to a passing mention, which lends only the sentences that name the subject.
"""

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import zip_longest

from core.models import SearchResult
from core.urls import normalize_url
from engines.keyphrases import link_queries
from engines.kinds import Kind, kind_of
from engines.naming import (
    LONG_PHRASE,
    SHORT_TITLE,
    TOPIC_MATCH,
    bare_title,
    bm25,
    by_surname,
    common_noun,
    ends_with_surname,
    mentions,
    modifies,
    named_among,
    namesake,
    phrase_count,
    same_word,
    spans_parts,
    subject_tokens,
    surnames,
    title_stems,
    written_alike,
)
from engines.sentences import first_sentence, split_sentences
from engines.subject import (
    ARTICLES,
    COPULAS,
    POSSESSIVE_AFTER,
    apostrophes,
    asked_of_subject,
    facet_asked,
    is_field,
    match_frame,
    plural,
    setting_of,
    verbs_of,
    without_setting,
    wrapped_phrase,
)
from tools.text import (
    FORM_WORDS,
    STOPWORDS,
    compared_parts,
    cosine,
    folded,
    stems,
    topic_parts,
    without_request,
    words,
    written_words,
)

# How much a source is about the subject (Relevance.of).
OWN = 1.0  # the subject's own article
TITLED = 0.9  # its title names the subject ("History of Buddhism")
LINKED = 0.8  # the subject's article names it, and it names the subject
DEVOTED = 0.7  # it names the subject in two sentences or more
RELATED = 0.6  # it shares the vocabulary of the subject's article, which names it or it names
MENTIONS = 0.4  # it names the subject in passing: only those sentences count
OFF = 0.0
# Sources of these kinds are about the subject through their own works.
_CREATORS: frozenset[Kind | None] = frozenset({"work", "person", "concept", "organisation"})
# Cosine of two articles' word counts above which they share a matter (Forest and
# Deforestation 0.57; Europe and Renaissance 0.05).
SHARED_MATTER = 0.3
# Of a source the subject's article names, whose text uses a word of the subject's name.
LINKED_MATTER = 0.2


def _significant(text: str) -> list[str]:
    """Stems that tell one name from another: no stopwords, but numbers ("World War I")."""
    return [t for t in subject_tokens(text) if t not in STOPWORDS or _NUMBER.fullmatch(t)]


_NUMBER = re.compile(r"[ivxlc]+|\d+")
# A thing of something, or one a relative clause says what it did to (`topic_subject`).
_OF_WHAT = re.compile(
    r"[a-z]+(?:\s+[a-z]+)?\s+(?:of|(?:who|that|which)\s+[a-z]+)\s+(?:the\s+)?(?P<s>\S.*)"
)


def topic_subject(topic: str, sources: Sequence[SearchResult]) -> str:
    """Return what the topic is about: its subject (`match_frame`), or what or where it is of.

    "religion in Japan", "volcanoes on Mars", "could life exist on Mars": a thing written in
    lower case, set in a named place or time whose article its own article does not name, is
    asked of that place ("the samurai in feudal Japan" stay the subject: Samurai names Japan;
    so do "the seasons on Earth": Season names Earth).
    """
    subject = match_frame(topic)[1]
    possessive = _possessive_name(topic, subject, sources)
    if possessive:
        return possessive
    name = _name_of_the_kind(subject, sources) or _name_before_verb(topic, sources)[0]
    if name:
        return name
    # "pyramids of giza": where the whole phrase has an article of its own (Great Pyramid of
    # Giza), not only what it is of (Giza), the whole is the subject.
    whole = wrapped_phrase(topic)
    if whole and whole != subject:
        article = subject_article(whole, sources)
        if (
            article is not None
            and article != subject_article(subject, sources)
            and set(_significant(whole)) <= set(_significant(article.title))
        ):
            return whole
    # "the decline of the Ottomans", "the climate of Antarctica", "the people who built
    # Stonehenge": what it is of is the subject (the Ottoman Empire, Antarctica, Stonehenge)
    # where the whole has no article of its own ("the fall of the Roman Empire" has).
    of = _OF_WHAT.fullmatch(subject)
    if of is not None:
        article = subject_article(of.group("s"), sources)
        if article is not None and subject_article(subject, sources) in (None, article):
            return of.group("s")
    setting = setting_of(topic)
    if not setting or subject[1:] != subject[1:].lower() or setting == setting.lower():
        return subject
    # Each by its article's name, whatever else was found ("Atmosphere of Earth").
    place, own = _titled(setting.split(), sources), _titled(subject.split(), sources)
    if place is None:
        return subject
    if own is None or phrase_count(folded(own.content), folded(bare_title(place.title))):
        return subject  # not known to be elsewhere, or its article places it there
    if subject[:1].isupper() and not common_noun(subject_tokens(subject), own.content):
        return subject  # a name ("Shinto in Japan"), not a plan's theme that opens a sentence
    return setting


# What a possessive pronoun says the subject has, up to a grammatical word: "his theory".
_OWNED = re.compile(
    r"\b(?:his|her|its|their)\s+((?:(?!(?:of|and|or|in|on|to|for|with|from)\b)[\w'’-]+\s*){1,3})",
    re.IGNORECASE,
)


def _possessive_name(topic: str, subject: str, sources: Sequence[SearchResult]) -> str:
    """Return the name the subject opens with its possessive, if an article bears it; or "".

    "the Hundred Years' War", "what causes Alzheimer's disease", "why was Hadrian's Wall
    built": a name, not what a possessor has ("Napoleon's greatest battles"), where a
    collected article's title is those words.
    """
    spaced = " ".join(topic.split())
    written = apostrophes(spaced)
    at = written.find(apostrophes(subject))
    if at < 0 or not POSSESSIVE_AFTER.match(written[at + len(subject) :]):
        return ""
    rest = written[at:]
    longest = ""
    for source in sources:
        title = apostrophes(bare_title(source.title))
        if (
            len(title) > len(longest)
            and rest.startswith(title)
            and not rest[len(title) : len(title) + 1].isalnum()
        ):
            longest = title
    return spaced[at : at + len(longest)]


def _name_of_the_kind(subject: str, sources: Sequence[SearchResult]) -> str:
    """Return the name that says whose or where a plural after it is, if it has an article.

    "stendhal novels", "tolkien books", "Kyoto temples": the novels are the name's, asked of
    it as "Napoleon's battles" are, where a collected article is titled by the words before
    the plural (or is a person of that surname) and writes them as a name; "" otherwise,
    and where an article bears the whole ("Galápagos tortoises" would be one).
    """
    said = subject.split()
    if len(said) < 2 or not plural(said[-1]) or not said[-1].islower():
        return ""
    if _titled(said, sources) is not None:
        return ""
    named = _titled(said[:-1], sources) or _surnamed(said[:-1], sources)
    if named is None or common_noun(subject_tokens(bare_title(named.title)), named.content):
        return ""
    return " ".join(said[:-1])


def _surnamed(said: list[str], sources: Sequence[SearchResult]) -> SearchResult | None:
    """Return the best ranked person whose surname is the one word `said` ("tolkien")."""
    return next(iter(_bearers(said, sources)), None)


def _bearers(said: list[str], sources: Sequence[SearchResult]) -> list[SearchResult]:
    """Return the people whose surname is the one word `said`, the best ranked first."""
    if len(said) != 1:
        return []
    return [
        source
        for source in sources
        if words(bare_title(source.title))[-1:] == [said[0].casefold()]
        and ends_with_surname(source.title)
        and kind_of(source.content) == "person"
    ]


def _name_before_verb(topic: str, sources: Sequence[SearchResult]) -> tuple[str, str]:
    """Return the name a question's subject opens with, and the verb that follows it.

    "how did Newton discover gravity", "why did Napoleon invade Russia": after the
    auxiliary, a name with no article and then a word in lower case that no title joins to
    it ("the Amazon rainforest", "Venus flytraps" stay whole) is the verb's subject. A
    surname one collected person bears is that person: Isaac Newton, not the newton.
    ("", "") where there is no such name.
    """
    frame, subject = match_frame(topic)
    if frame.name not in ("how", "why"):
        return "", ""
    said = subject.split()
    run = 0
    while run < len(said) and (
        said[run][:1].isupper()
        or (0 < run < len(said) - 1 and len(said[run]) <= 3 and said[run + 1][:1].isupper())
    ):
        run += 1  # "Leonardo da Vinci", "Alexander the Great"
    if not 0 < run < len(said) or said[run].lower() in STOPWORDS or plural(said[run]):
        return "", ""
    if said[run - 1].endswith(("'s", "’s")) or _titled(said[: run + 1], sources):
        return "", ""  # "Rome's economy", "Nile crocodile"
    people = _bearers(said[:run], sources)
    if len(people) == 1:
        return bare_title(people[0].title), said[run]
    if people or _titled(said[:run], sources):
        return " ".join(said[:run]), said[run]
    return "", ""


def subject_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """Return the source that is the subject's own article, if one was collected.

    Its title names the subject: the same words, or some of them including a head noun
    (the last word: "Heart" for "the human heart"; of either part of "X and Y"), or all of
    them and a few more names ("William Shakespeare" for "Shakespeare", but not
    "Shakespeare's sonnets": a thing of the subject). Among several, the closest, then
    the one written as the subject is, then the best ranked.
    """
    wanted = _significant(subject)
    if not wanted:
        return None
    # The head noun of each part of "X and Y" (the last word of each).
    heads = {part[-1] for part in map(_significant, re.split(r"\s+and\s+", subject)) if part}
    best: tuple[float, bool, int] | None = None
    found: SearchResult | None = None
    as_written = words(subject)
    for rank, source in enumerate(sources):
        title = _significant(source.title)
        if not title:
            continue
        if spans_parts(source.title, subject):
            continue
        if set(title) <= set(wanted) and heads & set(title):
            closeness = len(set(title)) / len(set(wanted))
            # A noun in -ing is another word than the one it is made of: "Marketing" is not
            # the market of "the stock market".
            gerund = any(_made_of(w, as_written) for w in words(bare_title(source.title)))
            alike = written_alike(bare_title(source.title), subject) and not gerund
        elif set(wanted) <= set(title) and _adds_only_names(source.title, subject):
            # Initials are no more name to match: "J. R. R. Tolkien" is all but Tolkien.
            closeness = len(set(wanted)) / len({t for t in title if len(t) > 1} | set(wanted))
            alike = written_alike(subject, bare_title(source.title))
        else:
            continue
        if not alike:  # one stem, two words: "Titans" is not named by "the Titanic"
            continue
        # Of two titles with the same stems, the one written as asked: Blues, not Blue.
        key = (closeness, words(bare_title(source.title)) == as_written, -rank)
        if closeness >= 0.5 and (best is None or key > best):
            best, found = key, source
    return (
        found
        or _abbreviated_article(subject, sources)
        or _movement_article(subject, sources)
        or _nearest_article(subject, sources)
        or _leading_article(subject, sources)
        or _defining_article(subject, sources)
    )


def _made_of(word: str, said: Sequence[str]) -> bool:
    """Return whether `word` is a noun in -ing made of a word of `said`: "marketing", "market".

    Not a word that only ends so ("king" of "kings").
    """
    if not word.endswith("ing"):
        return False
    base = word[:-3]
    forms = {base, f"{base}e", base[:-1] if base[-2:-1] == base[-1:] else base}
    return bool(forms & set(said))


def _abbreviated_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """Return the article whose name the subject abbreviates: initials, or "(GPS)" in its lead.

    "GPS" is the Global Positioning System, "DNA" the article that opens "Deoxyribonucleic
    acid (DNA) is ...".
    """
    short = subject.strip()
    if len(short.split()) != 1 or len(short) < 2:
        return None
    for source in sources:
        title = bare_title(source.title)
        initials = "".join(w[0] for w in title.split() if w[:1].isupper())
        spelled = rf"{re.escape(title)}\s*\(\s*{re.escape(short)}\s*[),;]"
        if initials.casefold() == short.casefold() or re.search(
            spelled, source.content[:300], re.IGNORECASE
        ):
            return source
    return None


def _nearest_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """When no title names the subject ("nuclear reactors"), the article that stands in.

    Its title shares a word with the subject and its text uses every word of it ("Nuclear
    power": "... Reactors producing ..."). A subject of one part (not "X and Y") may also
    stand in an article half of whose title is the subject's, with no number of its own,
    whose text uses most of the subject's words, two at least ("Solar power" for "cheap
    solar panels home", whose panels it names; not "World War II" for "World War I").
    Among several, the one that uses the most of them, then the one whose title names the
    most ("Printing press" before "Printing" for "printing press changed"), then the one
    that uses them most often, then the best ranked. A subject of one word has no stand-in.
    """
    one_part = len(topic_parts(subject)) < 2
    wanted = _content_words(subject) if one_part else set(_significant(subject))
    if len(wanted) < 2:
        return None
    enough = max(2, math.ceil(len(wanted) / 2)) if one_part else len(wanted)
    best: tuple[int, int, int, int] | None = None
    found: SearchResult | None = None
    for rank, source in enumerate(sources):
        title = set(_significant(source.title))
        if not wanted & title or spans_parts(source.title, subject):
            continue
        text = Counter(_significant(f"{source.title} {source.content}"))
        used = sum(1 for w in wanted if text[w])
        own = title - wanted  # the words of the title the subject does not give
        if used < len(wanted) and (
            used < enough or 2 * len(own) > len(title) or any(_NUMBER.fullmatch(t) for t in own)
        ):
            continue
        key = (used, len(title & wanted), sum(text[w] for w in wanted), -rank)
        if best is None or key > best:
            best, found = key, source
    return found


def _leading_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """When no title names the subject, the article named by its longest leading phrase.

    A subject cut out of a question may keep what is said of it: "coffee bad for you",
    "Great Wall of China visible from space". A collected title that its first words make
    exactly is its name: Coffee, Great Wall of China. Not for a subject of two parts ("tea
    vs coffee"). Among several, the best ranked.
    """
    if topic_parts(subject):
        return None
    said = subject.split()
    for n in range(len(said) - 1, 0, -1):
        if said[n - 1].lower() not in STOPWORDS and (found := _titled(said[:n], sources)):
            return found
    return None


def _titled(said: list[str], sources: Sequence[SearchResult]) -> SearchResult | None:
    """Return the best ranked source whose title is the words `said`, word for word (stemmed)."""
    phrase = " ".join(said)
    wanted = set(_significant(phrase))
    for source in sources:
        title = bare_title(source.title)
        if wanted and set(_significant(title)) == wanted and written_alike(title, phrase):
            return source
    return None


def _defining_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """When no title names the subject, the article with a sentence that says what it is.

    "A hurricane is a strong tropical cyclone ..." makes Tropical cyclone the article of
    "hurricanes". Among several, the one that says it soonest, then the best ranked.
    """
    wanted = subject_tokens(subject)
    while wanted and wanted[0] in ARTICLES:
        wanted = wanted[1:]
    if not wanted:
        return None
    best: tuple[int, int] | None = None
    found: SearchResult | None = None
    for rank, source in enumerate(sources):
        for position, sentence in enumerate(split_sentences(source.content)):
            tokens = subject_tokens(sentence)
            start = 1 if tokens[:1] and tokens[0] in ARTICLES else 0
            end = start + len(wanted)
            if tokens[start:end] == wanted and tokens[end : end + 1] and tokens[end] in COPULAS:
                if best is None or (-position, -rank) > best:
                    best, found = (-position, -rank), source
                break
    return found


def _content_words(subject: str) -> set[str]:
    """Return the subject's significant words, without those that shape a question."""
    return set(_significant(" ".join(w for w in words(subject) if w not in FORM_WORDS)))


# A plural noun of a role: "painters", "philosophers", "scientists", "musicians".
_ROLE = re.compile(r"(?:ers|ists|ians|ors)$")


def group_movement(subject: str) -> str | None:
    """Return what a group of people is named after, as a query; None for other subjects.

    "Impressionism" for "the French Impressionist painters", "Greek" for "the Greek
    philosophers".
    """
    parts = subject.split()
    if len(parts) < 2 or not _ROLE.search(parts[-1].lower()):
        return None
    nearest = parts[-2]
    return re.sub(r"ists?$", "ism", nearest) if re.search(r"\wists?$", nearest) else nearest


def _movement_article(subject: str, sources: Sequence[SearchResult]) -> SearchResult | None:
    """Return the article of what makes a group of people one ("the French Impressionists").

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
    """Return whether every word `title` adds to `subject` is capitalised (a name's part)."""
    have = set(words(subject))
    return all(
        w[:1].isupper() or w.lower() in STOPWORDS
        for w in re.findall(r"[^\W_]+", bare_title(title))
        if w.lower() not in have
    )


def matching_phrase(subject: str, article: SearchResult | None, partial: bool = False) -> str:
    """Return what a source must name to be about the subject.

    The shorter of the subject and the title of its own article (`subject_article`):
    "Heart" for "human heart", "Shakespeare" for "William Shakespeare"; the subject itself
    when no article of it was collected. Where the subject gives only the name inside the
    title, that name: "Titanic" for "what sank the Titanic" and "Sinking of the Titanic".
    A stand-in for part of the subject (`partial`, see `stands_in`) is named by the longest
    run of the subject's words its text writes too: "solar panels" for "cheap solar panels
    home".
    """
    if article is None:
        return subject
    title = article.title
    if partial:
        return _shared_phrase(subject, article.content) or title
    if len(words(title)) < len(words(subject)):
        return title
    return _name_given(bare_title(title), subject) or subject


def stands_in(article: SearchResult, subject: str) -> bool:
    """Whether the article stands in for part of the subject (`_nearest_article`).

    Its title is not made of the subject's words, and its text leaves some of them unsaid:
    "Solar power" for "cheap solar panels home"; not "Nuclear power" for "nuclear
    reactors", whose text says both, nor "Global Positioning System" for "GPS".
    """
    title, said = set(_significant(article.title)), _content_words(subject)
    text = set(_significant(f"{article.title} {article.content}"))
    return not title <= said and not said <= text


def _shared_phrase(subject: str, text: str) -> str | None:
    """Return the longest run of two or more of the subject's words that `text` writes too."""
    said = written_words(subject)  # as written, word for word with `tokens`
    tokens = subject_tokens(subject)
    written = subject_tokens(text)
    for n in range(len(tokens), 1, -1):
        for start in range(len(tokens) - n + 1):
            run = tokens[start : start + n]
            if run[0] in STOPWORDS or run[-1] in STOPWORDS:
                continue
            if phrase_count(written, run):
                return " ".join(said[start : start + n])
    return None


def _name_given(title: str, subject: str) -> str | None:
    """Return the name inside `title` (capitalised words after its first) that `subject` gives.

    None when the subject gives the whole title, or no such name.
    """
    said = words(subject)
    tokens = re.findall(r"[\w'’-]+", title)
    run: list[str] = []
    for token in tokens[1:]:
        if token[:1].isupper() and any(same_word(token, w) for w in said):
            run.append(token)
        elif run:
            break
    return " ".join(run) if run and not written_alike(title, subject) else None


def named_by(
    article: SearchResult | None, sources: Sequence[SearchResult], lead_only: bool = False
) -> frozenset[str]:
    """URLs of the sources whose title the subject's own article names (in its lead).

    Words are compared without plural endings but not stemmed: "humans" names no
    "Humanism", "lungs" names "Lung".
    """
    if article is None:
        return frozenset()
    lead = first_sentence(article.content) if lead_only else ""
    text = folded(lead if lead_only else article.content)
    own_name = set(folded(bare_title(article.title)))
    linked = set()
    for source in sources:
        title = folded(bare_title(source.title))
        # "Silk" is named by "Silk Road" only as part of the subject's own name.
        if source is article or not title or set(title) <= own_name:
            continue
        # In the lead, only as a name of its own: "Charles Babbage", not "work" or "writer",
        # nor "Carmen" inside "Magdalena Carmen Frida Kahlo".
        as_name = not lead_only or _alone_as_name(bare_title(source.title), lead)
        if phrase_count(text, title) and as_name:
            linked.add(normalize_url(source.url))
    return frozenset(linked)


def _leads(title: str, phrase: str) -> bool:
    """Whether `title` is the first words of `phrase`, and not all of it: "Light", "light bulb"."""
    first, whole = folded(title), folded(phrase)
    return len(first) < len(whole) and whole[: len(first)] == first


def _title_tokens(title: str) -> list[str]:
    """Return a title's words as a text must write them: plurals aside, unless the name ends so.

    "Volcano" is named by "volcanoes"; "Blues" is not named by "blue".
    """
    plain, without_plural = words(title), folded(title)
    return without_plural if plain == without_plural else plain


def _alone_as_name(name: str, text: str) -> bool:
    """Whether `text` writes `name` as written, not inside a longer capitalised name."""
    for found in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text):
        before = re.findall(r"[\w'’-]+", text[: found.start()])[-1:]
        after = re.findall(r"[\w'’-]+", text[found.end() :])[:1]
        if not any(w[:1].isupper() and w.lower() not in STOPWORDS for w in before + after):
            return True
    return False


@dataclass
class Relevance:
    """How much each source is about one subject, judged against the sources collected."""

    subject: str
    sources: Sequence[SearchResult]
    # The topic as asked: the articles it names are about it (`named_by_topic`).
    topic: str = ""
    # Named only as the titles the topic names are (`names`): a side's "Capitalism" is not
    # named by "capital", though both stem to "capit", nor its "Go" by "go through".
    as_written: bool = False
    article: SearchResult | None = field(init=False)
    phrase: list[str] = field(init=False)
    common: bool = field(init=False)  # a common noun ("penguins"), not a name (`common_noun`)
    _short: bool = field(init=False)  # a name of a few letters, not an abbreviation
    kind: Kind | None = field(init=False)
    _linked: frozenset[str] = field(init=False)
    # Named in the first sentence of the subject's article: "Ada Lovelace ... known for work
    # on Charles Babbage's proposed ... computer" (`_judge_subject`: for a person all of
    # them, for another subject the people).
    _in_lead: frozenset[str] = field(init=False)
    # What the topic sets in the place that is its subject: "religion" in "religion in Japan"
    # (`topic_subject`); "" for most topics.
    _placed: str = field(init=False)
    # Where else the topic sets its subject: "the cell" of mitochondria; "" for most topics.
    _setting: str = field(init=False)
    # What every source but the subject's own article must say to be about the topic: the
    # thing set in a place ("religion" of Japan), or the field that says which subject it
    # is ("economics" of inflation: not Cosmic inflation).
    _must_say: str = field(init=False)
    _matter: Counter[str] = field(init=False)
    _topical: frozenset[str] = field(init=False)
    # The titles of the articles the topic names: naming one names the topic.
    _alternatives: list[tuple[list[str], str]] = field(init=False)
    # Of those titles, the subject's own article's: naming it names the subject.
    _own: list[tuple[list[str], str]] = field(init=False)
    # Of those titles, the ones a question asks of a subject with an article of its own
    # ("Pain" in "do plants feel pain"; see `_only_asked`), and the others but its own.
    _asked: list[tuple[list[str], str]] = field(init=False)
    _unasked: list[tuple[list[str], str]] = field(init=False)
    _naming: list[tuple[list[str], str]] = field(init=False)  # but a facet's (`names`)
    # Of those titles, the ones a text must write as they are (`_title_tokens`: "Blues").
    _as_is: set[str] = field(init=False)
    _stemmed: dict[str, list[str]] = field(init=False)
    _common: set[str] = field(init=False)  # of those titles, the common nouns (`common_noun`)
    # Of the people the topic names, those no other collected person shares a surname with.
    _surnames: dict[str, set[str]] = field(init=False)
    # How well each source matches the topic's words, against the best (BM25).
    _matches: dict[str, float] = field(init=False)
    # With no article of the subject's own ("tea vs coffee", a question in two parts), each
    # article the topic names stands as a subject of its own: what is about one of them is
    # about the topic.
    _sides: list["Relevance"] = field(init=False)
    # Of those, the things compared that no collected title names ("epicureanism").
    _unnamed: list["Relevance"] = field(init=False)
    # Judged once per source: the review asks again for every claim that cites it.
    _judged: dict[str, float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.topic = without_request(self.topic)  # "tell me about X" names no "Tell"
        setting = setting_of(self.topic) if self.topic else ""
        placed = bool(setting) and self.subject == setting
        self._placed = match_frame(self.topic)[1] if placed else ""
        self._setting = "" if placed else setting
        self._must_say = self._placed or (self._setting if is_field(self._setting) else "")
        self.article = subject_article(self.subject, self.sources)
        partial = self.article is not None and stands_in(self.article, self.subject)
        written = matching_phrase(self.subject, self.article, partial)
        self.phrase = subject_tokens(written)
        # A name of one word of a few letters ("Go", "Art") is a common word too; an
        # abbreviation ("DNA") is not.
        self._short = _a_common_word(written)
        self.common = self.article is not None and common_noun(self.phrase, self.article.content)
        self.kind = kind_of(self.article.content) if self.article else None
        self._linked = named_by(self.article, self.sources)
        self._in_lead = named_by(self.article, self.sources, lead_only=True)
        scores = bm25(set(stems(self.topic)), self.sources) if self.topic else []
        self._topical = self._named_by_topic(scores)
        self._matches = self._topic_matches(scores)
        titles = {
            bare_title(s.title) for s in self.sources if normalize_url(s.url) in self._topical
        }
        if self.article is not None:  # "Global Positioning System" names "GPS"
            own = bare_title(self.article.title)
            # A title the topic writes before the subject's name, or its article's, is its
            # modifier: "ocean tides" are not named by "ocean", "ancient greek olympics" not
            # by "Ancient Greek philosophy".
            heads = (own, written)
            titles = {t for t in titles if not any(modifies(t, h, self.topic) for h in heads)}
            if phrase_count(folded(own), folded(written)):
                # A compound the article's title holds whole ("light bulb" in "Incandescent
                # light bulb"): its first words modify it, and name nothing of it: the Speed
                # of light is not about light bulbs.
                titles = {t for t in titles if not _leads(t, written)}
            if partial:
                # What the topic names beside the subject a stand-in stands for is no part
                # of it: "home" in "cheap solar panels home", which "Solar power" never says.
                used = set(subject_tokens(self.article.content))
                beside = {t for t in titles if not set(subject_tokens(t)) <= used}
                titles -= beside
                self._topical = frozenset(
                    normalize_url(s.url)
                    for s in self.sources
                    if normalize_url(s.url) in self._topical and bare_title(s.title) not in beside
                )
            titles |= {own}
        self._alternatives = [(_title_tokens(t), t) for t in sorted(titles) if words(t)]
        self._as_is = {t for tokens, t in self._alternatives if tokens != folded(t)}
        own_title = bare_title(self.article.title) if self.article else None
        self._own = [(tokens, t) for tokens, t in self._alternatives if t == own_title]
        facet = facet_asked(self.topic, self.subject) if self.article else ""
        asked = set(stems(self._asked_words(facet))) if self.article else set()
        others = [(tokens, t) for tokens, t in self._alternatives if t != own_title]
        self._asked = [(tokens, t) for tokens, t in others if asked >= set(stems(t)) != set()]
        self._unasked = [pair for pair in others if pair not in self._asked]
        # What the words around the subject ask of it names none of it: "painting" names no
        # part of "the most famous paintings of Rembrandt", though the article Painting is
        # about it. (What a question asks after its subject does: "the immune system" of
        # "how vaccines train the immune system".)
        facet_stems = set(stems(facet))
        self._naming = [
            (tokens, t)
            for tokens, t in self._alternatives
            if not facet_stems >= set(stems(t)) != set()
        ]
        self._surnames = surnames(titles, self.sources)
        self._stemmed = {t: subject_tokens(t) for _, t in self._alternatives}
        text = {bare_title(s.title): s.content for s in self.sources}  # each title's article
        self._common = {t for t, tokens in self._stemmed.items() if common_noun(tokens, text[t])}
        self._matter = (
            Counter(stems(f"{self.article.title} {self.article.content}"))
            if self.article
            else Counter()
        )
        sides = [] if self.article is not None or not self.topic else self._alternatives
        named = [title for _, title in sides]
        # A thing compared that no collected title names stands as a side of its own, by its
        # words: "epicureanism" in "stoicism vs epicureanism", said by Epicurus's article.
        unnamed = [
            part
            for part in (compared_parts(self.topic) if sides else [])
            if not any(set(_significant(t)) <= set(_significant(part)) for t in named)
        ]
        self._unnamed = [Relevance(part, self.sources) for part in unnamed]
        self._sides = [Relevance(title, self.sources, as_written=True) for title in named]
        self._sides += self._unnamed

    def _named_by_topic(self, bm25_scores: Sequence[float]) -> frozenset[str]:
        """The sources whose titles the topic names, but not its verb nor where it is set.

        "how airplanes fly" is not about the insect, "why is Shakespeare still read" not
        about Reading, "how did Marco Polo travel to China" not about Travel; what the
        subject has is asked of it ("how did Darwin develop his theory": not Theory); "the
        effects of the Black Death in Europe" asks about the plague: Europe is where, and
        the rivers and councils of Europe are not about it. A setting that is no place
        stays ("karma in Hinduism").
        """
        if not self.topic:
            return frozenset()
        verbs = verbs_of(self.topic)
        verbs.add(_name_before_verb(self.topic, self.sources)[1])
        verbs.discard("")
        owned = [set(stems(had)) for had in _OWNED.findall(self.topic)]
        scored = [
            (source, score)
            for source, score in zip(self.sources, bm25_scores, strict=True)
            if not any(same_word(bare_title(source.title), verb) for verb in verbs)
            and not any(set() != title_stems(source.title) <= had for had in owned)
        ]
        sources, scores = [s for s, _ in scored], [score for _, score in scored]
        named = named_among(self.topic, sources, scores)
        asked = without_setting(self.topic)
        kept = named if asked == self.topic else named_among(asked, sources, scores)
        return frozenset(
            key
            for source in sources
            if (key := normalize_url(source.url)) in named
            and (key in kept or kind_of(source.content) != "place")
        )

    def _topic_matches(self, bm25_scores: Sequence[float]) -> dict[str, float]:
        """How well each source matches the topic's words (BM25), against the best match.

        The best among the articles the topic names: a title word repeated ("Go" in
        "dinosaurs go extinct") may make a stray article the best match of all.
        """
        if not self.topic:
            return {}
        urls = (normalize_url(s.url) for s in self.sources)
        scores = dict(zip(urls, bm25_scores, strict=True))
        named = self._topical | ({normalize_url(self.article.url)} if self.article else set())
        best = max((scores[k] for k in named if k in scores), default=0.0)
        best = best or max(scores.values(), default=0.0) or 1.0
        return {key: score / best for key, score in scores.items()}

    @classmethod
    def of_topic(cls, theme: str, sources: Sequence[SearchResult]) -> "Relevance":
        """How much each source is about the topic as asked (its subject by `topic_subject`)."""
        return cls(topic_subject(theme, sources), sources, theme)

    def link_queries(
        self, sources: Sequence[SearchResult], done: Sequence[str], limit: int
    ) -> list[str]:
        """Return what the subject's own article names, as queries (`keyphrases.link_queries`).

        With no article of its own, what each side's article names, taken in turn: both
        sides of a comparison, both parts of a question in two.
        """
        if not self._sides:
            return link_queries(self.article, self.subject, sources, done, limit)
        each = [side.link_queries(sources, done, limit) for side in self._sides]
        turns = (query for row in zip_longest(*each) for query in row if query)
        return list(dict.fromkeys(turns))[:limit]

    def names(self, text: str, short: bool = True) -> bool:
        """Return whether `text` names the subject, or another article the topic names.

        Not one it names only as what the words around the subject ask of it ("paintings" of
        Rembrandt's). "Chess" and "Go" name the topic "chess versus go". A title is named
        word for word, plurals aside ("Invention" is not "invented"); a title of one short
        word only as written ("Go", not "go"; nor inside a hyphenated name: "Yi Sun-sin" is
        not the Sun): short words are common words too, unless its article writes it as one
        ("cat", so "Siamese cat" names Cat). Without `short`, a name of one short word does
        not count at all.
        """
        if self._names_subject(text, short):
            return True
        return self._names_title(text, self._naming, short) or any(
            by_surname(text, surname, name) for surname, name in self._surnames.items()
        )

    def _names_title(
        self, text: str, titles: Sequence[tuple[list[str], str]], short: bool = True
    ) -> bool:
        """Return whether `text` names one of `titles` (of `_alternatives`), as `names` says."""
        if not titles:
            return False
        written = folded(text)
        as_is = words(text) if self._as_is else written
        return any(
            (
                (short or not _a_common_word(title))
                and re.search(rf"(?<![\w-]){re.escape(title)}(?![\w-])", text) is not None
            )
            if len(tokens) == 1 and len(title) <= SHORT_TITLE and title not in self._common
            else phrase_count(as_is if title in self._as_is else written, tokens) > 0
            and mentions(text, self._stemmed[title], title in self._common) > 0
            for tokens, title in titles
        )

    def _by_phrase(self) -> bool:
        """Whether the subject's own phrase names it (else only the titles the topic names).

        A long phrase is named by most of its words; where the topic names articles, those
        say what it is about ("the differences between capitalism and socialism" is not
        named by every sentence with "capital" and "social" in it).
        """
        loose = len(self.phrase) > LONG_PHRASE and bool(self._alternatives)
        return bool(self.phrase) and not loose and not self.as_written

    def _names_subject(self, text: str, short: bool = True) -> bool:
        """Return whether `text` names the subject: by its phrase, or its article's title."""
        by_phrase = self._by_phrase() and (short or not self._short)
        if by_phrase and mentions(text, self.phrase, self.common) > 0:
            return True
        return self._names_title(text, self._own, short)

    def _of_a_kind(self) -> bool:
        """Return whether the subject is a kind of thing: a common noun, or only such sides."""
        if self.article is not None:
            return self.common
        return bool(self._alternatives) and all(t in self._common for _, t in self._alternatives)

    def asked_for(self, source: SearchResult) -> bool:
        """Whether the source is the subject's own article or one the topic names.

        Of a thing compared that no title names, a source about the topic that names it
        stands in for its article: the summary speaks of both sides.
        """
        if self.of(source) == OWN or normalize_url(source.url) in self._topical:
            return True
        return self.of(source) >= DEVOTED and any(side.of(source) > OFF for side in self._unnamed)

    def of(self, source: SearchResult) -> float:
        """OWN, TITLED, LINKED, DEVOTED, RELATED, MENTIONS or OFF."""
        key = normalize_url(source.url)
        if key not in self._judged:
            self._judged[key] = self._judge(source, key)
        return self._judged[key]

    def _judge(self, source: SearchResult, key: str) -> float:
        only_asked = self._only_asked(source)
        judged = self._judge_subject(source, key, only_asked)
        if self._sides:  # a side's own article is one the topic names: TITLED
            judged = max(judged, min(TITLED, max(side.of(source) for side in self._sides)))
        # The articles the topic names are about it, also where the subject's phrase
        # misses them (a comparison, keywords, a question with two parts).
        if judged < TITLED and key in self._topical:
            judged = TITLED
        # One that names it and matches the whole topic well is about it: the extinction
        # event in "why did the dinosaurs go extinct"; of a comparison, one that names a side
        # as that side's article does ("Tiger" in Tiger Woods is a name, not the animal).
        sided = not self._sides or any(side.of(source) > OFF for side in self._sides)
        matches = self._matches.get(key, 0.0) >= TOPIC_MATCH
        if judged == MENTIONS and matches and sided and not only_asked:
            judged = DEVOTED
        if judged not in (OWN, MENTIONS, OFF) and self._must_say:
            # Of "religion in Japan", what is about Japan and never says religion (Manga)
            # lends only the sentences that name Japan with more of the topic.
            said = stems(f"{source.title} {source.content}")
            return judged if all(_says(said, w) for w in stems(self._must_say)) else MENTIONS
        return judged

    def _asked_words(self, facet: str) -> str:
        """Return what the topic asks of its subject: "feel pain" of plants, "religion" of Japan.

        Also the `facet` the words around it ask (`facet_asked`: "biology" of sleep) and where
        else it is set (the cell of mitochondria).
        """
        asked = (self._placed, asked_of_subject(self.topic), facet, self._setting)
        return " ".join(a for a in asked if a)

    def _only_asked(self, source: SearchResult) -> bool:
        """Whether the source names, of the topic, only what a question asks of its subject.

        "Gout" names the pain of "do plants feel pain" and never plants; "Doping in sport"
        the sport of "is chess a sport". It is no article the topic names (those are
        `_topical`), and it is not about the topic through those names. What the subject's
        own words name is no part of what is asked: "Computer" in "how a computer processor
        works".
        """
        if not self._asked:
            return False
        text = f"{source.title}. {source.content}"
        return not self._names_subject(text) and not self._names_title(text, self._unasked)

    def _judge_subject(self, source: SearchResult, key: str, only_asked: bool) -> float:
        if not self.phrase:
            return MENTIONS
        if self.article is not None and key == normalize_url(self.article.url):
            return OWN
        if self.article is not None and namesake(source.title, self.article.title):
            return OFF  # "Muhammad Ali of Egypt" when "Muhammad Ali" is the subject's own
        if bare_title(source.title).lower() in self._surnames:
            return OFF  # a thing that bears a person's surname alone: "Tesla (unit)"
        if self.names(source.title) and not only_asked:
            if self.kind not in _CREATORS and kind_of(source.content) == "work":
                return OFF  # a film or novel that takes the subject's name
            if self._of_a_kind() and _an_instance(source.title):
                return DEVOTED  # an example of it, not the subject: Poyang Lake for lakes
            return TITLED
        sentences = split_sentences(source.content)
        naming = [i for i, s in enumerate(sentences) if self.names(s)]
        if len(naming) == 1 and not self.names(sentences[naming[0]], short=False):
            naming = []  # a name of a few letters ("Go") said once may be another's ("pass Go")
        linked = key in self._linked
        if linked and naming:
            return LINKED
        if len(naming) >= 2 and not only_asked:
            return DEVOTED
        if key in self._in_lead and "person" in (self.kind, kind_of(source.content)):
            return RELATED  # who and what made a person known; the people a lead names
        if linked or naming:  # and it shares the subject's matter: satellites for GPS
            matter = Counter(stems(f"{source.title} {source.content}"))
            shared = cosine(self._matter, matter)
            if shared >= SHARED_MATTER:
                return RELATED
            # Less of it where its text uses a word of the subject's name: the tropical
            # rainforest of the Amazon rainforest, the nuclear weapon of the atomic bombings.
            if (
                linked
                and shared >= LINKED_MATTER
                and set(stems(" ".join(self.phrase))) & matter.keys()
            ):
                return RELATED
        return MENTIONS if naming else OFF


def _says(stemmed: Sequence[str], stem: str) -> bool:
    """Whether a text (its stems) uses a word of `stem`'s family: "religious" of "religion"."""
    root = stem[: max(4, len(stem) - 2)]
    return any(s.startswith(root) for s in stemmed)


def _an_instance(title: str) -> bool:
    """Return whether a title is a proper name of several words: "Poyang Lake", not "Dry lake".

    Of a common noun, such a title names one of its kind (a lake, a river), not the kind.
    """
    named = [w for w in bare_title(title).split() if w.lower() not in STOPWORDS]
    return len(named) >= 2 and all(w[:1].isupper() for w in named)


def _a_common_word(name: str) -> bool:
    """Return whether a name is one word of a few letters ("Go", "Art"), not an abbreviation."""
    return len(words(name)) == 1 and len(name) <= SHORT_TITLE and not name.isupper()


def about_topic(theme: str, sources: Sequence[SearchResult]) -> list[SearchResult]:
    """Return the sources about the topic, the most relevant first (as collected where equal).

    What a model is given to write from: the same judgement the extractive writer and the
    review make, so a model's report draws on the same sources. All of them when none is
    about the topic (the writer then says what is missing).
    """
    relevance = Relevance.of_topic(theme, sources)
    about = [s for s in sources if relevance.of(s) > OFF]
    return sorted(about, key=relevance.of, reverse=True) if about else list(sources)
