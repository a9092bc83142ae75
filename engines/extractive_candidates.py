"""The sentences the extractive writer may quote, and what is known about each.

A quotable sentence stands alone: a leading pronoun for the article's subject becomes its
name; early in an article, one whose opening pronoun stands for what the sentence before
names is quoted with that sentence; any other that leans on an unquoted one is refused.
"""

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from core.models import SearchResult
from engines.kinds import kind_of
from engines.naming import FORM_STEMS, bare_title
from engines.relevance import MENTIONS, OFF, OWN, RELATED, Relevance
from engines.sentences import RUN_ON_CHARS, first_sentence, split_sentences
from tools.text import cosine, fold, stems, words

# How much a sentence that names the subject, in a source that only mentions it, is
# about it: below the bar of a key finding (`engines.extractive_writer`).
PASSING = 0.55
_MIN_CHARS, _MAX_CHARS = 40, RUN_ON_CHARS
# Sentences that open with these lean on a previous sentence we may not quote.
_DANGLING = re.compile(
    r"^(?:this|these|those|they|them|such|also|but|and|both|another|other|additional)\b",
    re.IGNORECASE,
)
# A connective that ties a sentence to the one before it ("Nevertheless, bossa nova was
# influenced by jazz"): quoted alone, the sentence says its claim without it.
_CONNECTIVE = re.compile(
    r"^(?:however|nevertheless|nonetheless|moreover|furthermore|additionally|in addition"
    r"|similarly|likewise|consequently|therefore|thus|hence|as a result|meanwhile|instead"
    r"|in contrast|by contrast|on the other hand|in fact|indeed),\s+(?=\w)",
    re.IGNORECASE,
)
_CONTEXTUAL = re.compile(
    r"\b(?:that|the same|this|the following|the previous)\s+(?:century|year|decade|period|time|day|month)\b"
    r"|\b(?:this|these|those|the latter|the former)\b",
    re.IGNORECASE,
)
_CATEGORY = re.compile(r"^The ([a-z]+)\b")
_PERSONAL = re.compile(r"^(He|She)\b")
_PERSON_PRONOUN = re.compile(r"\b(?:he|she|him|his|her|hers)\b")
_POSSESSIVE = re.compile(r"^(His|Her|Its)\b")
# "The term ...", "The two ...": these stand for something named before; quoted alone,
# a reader cannot tell what. Kept only when the lead defines the noun (see below).
_ANAPHORIC = frozenset(
    "term field two three former latter same work film book album song novel play series "
    "group band company movement game show city country region".split()
)
# "As one of the first known theropods, it has ...": an "it" or "they" after an opening
# clause that names nothing stands for what an earlier sentence named.
_LATE_IT = re.compile(r"^[A-Z][^A-Z,.;]{0,150},\s+(it|its|they|their|them)\s")
# "Located on the Yellow River, it is ...": the sentence's subject is "it".
_IT = re.compile(r"^[^.;]{0,150}?,\s+it\s")
# In an article about a person, the "he" or "she" the sentence opens with, or that follows
# an opening clause, whatever it names ("In the Iliad, he is presented as ..."): the person.
_HE = re.compile(r"^(?:He|She)\b|^[^.;]{0,150}?,\s+(he|she)\s")
# "This basin encompasses ...": a demonstrative and a noun, then the sentence goes on with
# a word that is not a grammatical one ("This led to" is a verb, not a noun).
_DEMONSTRATIVE = re.compile(r"^(?:This|These)\s+([a-z][a-z-]+)\s+([a-z]+)\b")
_GRAMMATICAL = frozenset(
    "a an the it its them they their this that these those to of in on at by for with from "
    "as and or but".split()
)
_COPULAS = frozenset("is are was were be been has have had".split())
# A sentence that opens with a pronoun it cannot be quoted without (`_leans_on`) is quoted
# with the sentence before it, up to this far into the article (0: the lead).
_OPENING_PRONOUN = re.compile(r"^(It|Its|They|Their|He|His|She|Her)\b")
_LEANING_AT_MOST = 2
# "It" stands for the subject, but not where it is impersonal: "It is thought that", "It
# can be said that".
_NEUTER = re.compile(
    r"^It\b(?!\s+is\s+(?:not\s+)?(?:known|thought|believed|estimated|said|likely|possible|unclear)"
    r"|\s+(?:can|could|may|might|must|should)\s+be\s+(?:said|argued|noted|thought))"
)


@dataclass(slots=True)
class Candidate:
    """A sentence that could go into the report, with what is known about it."""

    text: str
    source: SearchResult
    position: int
    terms: Counter[str]
    topical: float
    about: float = 0.0  # how much its source is about the subject (engines.relevance)
    named: bool = False  # the sentence names the subject
    person: bool = False  # from an article about a person the subject concerns
    # It speaks of its own source's subject (it opens with that subject or its pronoun),
    # and the topic's subject is a name that source's definition gives: a work or a part of
    # it. Of Jane Austen, "A novel of manners, it follows ..." in "Pride and Prejudice is a
    # novel by English author Jane Austen. ..." (not what television is, for sound: a common
    # noun is named by too much).
    of_a_part: bool = False
    # Of two sentences quoted together, the first: the one the second leans on (`_leans_on`).
    opening: str = ""
    base: float = 0.0


def capitalise(text: str) -> str:
    """Return the text with its first letter upper case, the rest untouched."""
    return text[:1].upper() + text[1:]


def _subject_phrase(source: SearchResult) -> str:
    """Return how a sentence names the article's subject ('the printing press', 'Gutenberg')."""
    title = bare_title(source.title)
    lead = source.content[:200]
    common_noun = title[:1].lower() + title[1:]
    if re.match(rf"(?:A|An|The)\s+{re.escape(common_noun)}\b", lead):
        return f"the {common_noun}"
    if re.match(rf"The\s+{re.escape(title)}\b", lead):
        return f"the {title}"
    return title


def _plural_subject(source: SearchResult) -> str | None:
    """Return the plural the lead opens with, as written, if it names the article's subject.

    "The Beatles were an English rock band", "In humans, the kidneys are two ... organs" (of
    "Kidney").
    """
    title = re.escape(bare_title(source.title))
    plural = (
        rf"{title}|{title}e?s|{title[:-1]}ies" if title.endswith("y") else rf"{title}|{title}e?s"
    )
    lead = re.match(
        rf"(?:[^,.]{{0,40}},\s+)?((?:the\s+)?(?:{plural}))\s+(?:are|were)\b",
        source.content,
        re.IGNORECASE,
    )
    return lead.group(1) if lead else None


def _names_a_person_first(sentence: str, source: SearchResult, position: int) -> bool:
    """Return False when a personal pronoun comes before its name ("In his youth, he").

    A name is a run of capitalised words or a word of the title ("Born in Florence, he").
    The lead names whom its pronouns stand for, in whatever words: "François-Marie Arouet,
    known by his pen name Voltaire, was ...".
    """
    pronoun = _PERSON_PRONOUN.search(sentence)
    if pronoun is None or position == 0:
        return True
    title = set(words(source.title))
    # "During his long career, Monet was ...": the name right after the clause is its "his".
    clause = re.match(r"[^,]*,\s+([A-Z][\w'’-]*)", sentence)
    if clause and clause.group(1).lower() in title:
        return True
    before = re.findall(r"[\w'’.-]+", sentence[: pronoun.start()])
    return any(
        word[:1].isupper()
        and (
            re.sub(r"['’]s$", "", word.lower().strip(".")) in title
            or (i + 1 < len(before) and before[i + 1][:1].isupper() and i > 0)
        )
        for i, word in enumerate(before)
    )


def _a_person(source: SearchResult) -> bool:
    """Return whether the article is about the person its title (and its lead) names.

    The title's initials aside: "John J. Pershing" is "John Joseph Pershing".
    """
    lead = set(words(lead_sentence(source)))
    named = {w for w in words(bare_title(source.title)) if len(w) > 1} <= lead
    return named and kind_of(source.content) == "person"


@dataclass(frozen=True, slots=True)
class _Article:
    """How an article names its own subject: worked out once, asked of every sentence."""

    source: SearchResult
    subject: str  # `_subject_phrase`: "the printing press", "Gutenberg"
    plural: str | None  # `_plural_subject`: "The Beatles"
    person: bool  # `_a_person`
    # A sentence about the subject opens with it, "It" or (of a plural) "They"; or, of a
    # person, with "He" or a "he" after an opening clause (of another thing, an "it").
    opens: re.Pattern[str]
    late: re.Pattern[str]

    @classmethod
    def of(cls, source: SearchResult) -> "_Article":
        """Read the article's lead and title once."""
        subject, plural, person = (
            _subject_phrase(source),
            _plural_subject(source),
            _a_person(source),
        )
        names = [re.escape(subject), "It", *([re.escape(plural), "They"] if plural else [])]
        opens = re.compile(rf"(?:{'|'.join(names)})\b(?!['’])", re.IGNORECASE)
        return cls(source, subject, plural, person, opens, _HE if person else _IT)

    def speaks_of_it(self, sentence: str) -> bool:
        """Return whether the sentence opens with the subject, or its pronoun (`opens`, `late`)."""
        return bool(self.opens.match(sentence) or self.late.match(sentence))


def _named_before(sentence: str, before: str) -> str:
    """Replace an opening "This N" by the noun phrase the sentence before named N by.

    "... covers most of the Amazon basin of South America. This basin encompasses ..."
    reads "The Amazon basin encompasses ..."; a sentence whose demonstrative names no
    noun of the sentence before is returned as it is.
    """
    opening = _DEMONSTRATIVE.match(sentence)
    if opening is None or opening.group(1) in _GRAMMATICAL | _COPULAS:
        return sentence
    if opening.group(2) in _GRAMMATICAL:  # "This led to ...": a verb, not a noun
        return sentence
    noun = re.escape(opening.group(1))
    # The last "the ... N" of the sentence before, from the "the" nearest the noun.
    found = list(re.finditer(rf"(?=\b[Tt]he\s+((?:[\w'’-]+\s+){{0,3}}?){noun}\b)", before))
    if not found or set(found[-1].group(1).lower().split()) & _GRAMMATICAL:
        return sentence
    return f"The {found[-1].group(1)}{opening.group(1)}" + sentence[opening.end(1) :]


def _resolve_pronoun(
    sentence: str, article: _Article, position: int, subject_before: bool = False, before: str = ""
) -> str | None:
    """Replace a leading pronoun that refers to the article's subject; None if unsafe to quote.

    An "it" after an opening clause ("Historically, it has been ...") stands for the
    article's subject when the sentence before was about it too (`subject_before`): the
    lead, or one that opened with the subject or "it"; so do a person's "he" or "she", and
    an opening "They" where the lead names a plural subject ("The Beatles were ...").
    A connective that opens it goes first (`_CONNECTIVE`).
    """
    if position == 0:
        return sentence
    source, subject, plural, person = (
        article.source,
        article.subject,
        article.plural,
        article.person,
    )
    sentence = capitalise(_CONNECTIVE.sub("", sentence, count=1))
    if plural and subject_before and sentence.startswith("They "):
        sentence = capitalise(plural) + sentence[len("They") :]
    sentence = _named_before(sentence, before)
    if _DANGLING.match(sentence) or _CONTEXTUAL.search(sentence):
        return None
    late_person = _HE.match(sentence) if person else None
    if late_person and late_person.group(1):
        if not subject_before:
            return None
        return sentence[: late_person.start(1)] + subject + sentence[late_person.end(1) :]
    late = _LATE_IT.match(sentence)
    if late:
        if not subject_before or late.group(1) not in ("it", "its") or person:
            return None
        # Inside a sentence a common noun is written as its article writes it: "satire".
        lower = subject[:1].lower() + subject[1:]
        name = lower if re.search(rf"\b{re.escape(lower)}\b", source.content) else subject
        possessive = "'s" if late.group(1) == "its" else ""
        return sentence[: late.start(1)] + name + possessive + sentence[late.end(1) :]
    personal = _PERSONAL.match(sentence)
    if (personal or sentence.startswith(("His ", "Her "))) and not person:
        return None  # "She sank ..." in an article on a sinking means the ship
    if personal:
        return _PERSONAL.sub(capitalise(subject), sentence, count=1)
    if _POSSESSIVE.match(sentence):
        return _POSSESSIVE.sub(capitalise(subject) + "'s", sentence, count=1)
    if _NEUTER.match(sentence):
        return _NEUTER.sub(capitalise(subject), sentence, count=1)
    if sentence.startswith("It "):
        return None  # "It is thought that ...": the pronoun names no one we can substitute
    category = _CATEGORY.match(sentence)
    # "The painting ..." where the lead's predicate is headed "X is a painting by": it is X.
    if category and re.search(
        rf"\b(?:is|was|are|were)\s+(?:a|an|the)\s+(?:[\w-]+\s+){{0,3}}{category.group(1)}"
        r"(?=\s*[,.;(]|\s+(?:by|of|in|that|which|who|from|for|with|about|and|\w+ed)\b)",
        lead_sentence(source),
    ):
        return capitalise(subject) + sentence[category.end() :]
    if (category and category.group(1) in _ANAPHORIC) or sentence.startswith("Their "):
        return None
    return sentence


def _leans_on(sentence: str, before: str) -> bool:
    """Whether the sentence's opening pronoun can only stand for what `before` names.

    So early in an article (`_LEANING_AT_MOST`) nothing else was named; "They" needs a
    plural there ("The Academy Awards ... are awards for ... They are presented ...").
    """
    pronoun = _OPENING_PRONOUN.match(sentence)
    if pronoun is None:
        return False
    if pronoun.group(1) in ("They", "Their"):
        return any(fold(w) != w for w in re.findall(r"\b[a-z]+\b", before))
    return True


def lead_sentence(source: SearchResult) -> str:
    """Return the source's first sentence: an encyclopaedia article's definition."""
    return first_sentence(source.content)


def quotable(
    sources: Sequence[SearchResult], relevance: Relevance
) -> tuple[list[Candidate], dict[str, float]]:
    """Return the sentences worth quoting, with their base scores, and the sources' idf.

    A source not about the subject is skipped; one that mentions it in passing lends only the
    sentences that name it with two of the topic's words or more. The base score weighs
    centrality (TF-IDF cosine to all candidates), topicality and position.
    """
    documents: list[set[str]] = []
    candidates: list[Candidate] = []
    asked = set(stems(relevance.topic)) - FORM_STEMS
    # More of the topic than one name: "... every continent except Antarctica".
    passing_bar = min(2, len(asked))
    for source in sources:
        documents.append(set(stems(f"{source.title} {source.content}")))
        about = relevance.of(source)
        if about == OFF:
            continue
        article = _Article.of(source)
        # A work or part of what the topic names: its definition names it ("a novel by ...").
        a_part = not relevance.common and relevance.names(lead_sentence(source))
        subject_before = False  # the sentence before this one spoke of the article's subject
        before = ""  # the sentence before this one
        alone = ""  # the sentence before this one, as it could be quoted alone
        for position, raw in enumerate(split_sentences(source.content)):
            previous, subject_before = subject_before, position == 0 or article.speaks_of_it(raw)
            before, sentence_before, leaned_on = raw, before, alone
            alone = ""
            if not _MIN_CHARS <= len(raw) <= _MAX_CHARS or raw.endswith(("?", ":")):
                continue
            text = _resolve_pronoun(raw, article, position, previous, sentence_before)
            opening = ""
            if text is not None and _names_a_person_first(text, source, position):
                alone = text
            elif leaned_on and position <= _LEANING_AT_MOST and _leans_on(raw, leaned_on):
                # "She sank two hours later", after the sentence that names the ship: quoted
                # with that sentence, as the source writes the two.
                text, opening, position = f"{leaned_on} {raw}", leaned_on, position - 1
            else:
                continue
            # "The band comprised ..." read as "The Beatles comprised ...": of it too.
            subject_before = subject_before or bool(article.opens.match(text))
            terms = Counter(stems(text))
            named = relevance.names(text)
            if about <= MENTIONS and not (named and len(asked & terms.keys()) >= passing_bar):
                continue
            if len(terms) >= 4:
                # Naming the subject where its source only mentions it: no key finding.
                topical = max(about, PASSING) if named else about
                # The article that is the subject itself opens with its definition.
                if about == OWN:
                    topical += 0.5 / (1 + position)
                candidates.append(
                    Candidate(
                        text=text,
                        source=source,
                        position=position,
                        terms=terms,
                        topical=topical,
                        about=about,
                        named=named,
                        person=about >= RELATED and kind_of(source.content) == "person",
                        of_a_part=a_part and subject_before,
                        opening=opening,
                    )
                )
    n = max(len(documents), 1)
    document_frequency = Counter(t for doc in documents for t in doc)
    idf = {t: math.log(1 + n / df) for t, df in document_frequency.items()}
    centroid: Counter[str] = Counter()
    for candidate in candidates:
        centroid.update(candidate.terms)
    for candidate in candidates:
        candidate.base = (
            0.35 * cosine(candidate.terms, centroid, idf)
            + 0.40 * candidate.topical
            + 0.15 / (1 + candidate.position)
            + 0.10 * (candidate.source.relevance_score or 0.0)
        )
    return candidates, idf
