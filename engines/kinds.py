"""What kind of thing an article is about, from how its first sentence defines it.

The head noun of the lead's definition names the kind ("The heart is a muscular organ").
"""

import re
from functools import lru_cache
from typing import Literal

from engines.sentences import split_sentences

Kind = Literal[
    "person",
    "event",
    "place",
    "organisation",
    "work",
    "technology",
    "process",
    "living",
    "substance",
    "concept",
]

# Head nouns of a definition, by kind. General English, not any topic's vocabulary.
_HEADS: dict[str, Kind] = {
    **dict.fromkeys(
        "war battle revolution movement period era age crisis depression restoration "
        "program programme mission campaign expedition conflict invasion conquest siege "
        "rebellion uprising reform reformation pandemic epidemic election event festival "
        "games competition tournament assassination disaster reign genocide crash "
        "landing spaceflight treaty downturn".split(),
        "event",
    ),
    **dict.fromkeys(
        "empire country state kingdom city nation republic region continent island river "
        "mountain sea ocean capital town caliphate sultanate territory province peninsula "
        "desert lake route dynasty".split(),
        "place",
    ),
    **dict.fromkeys(
        "organization organisation company corporation party institution agency band "
        "team club university church exchange association".split(),
        "organisation",
    ),
    **dict.fromkeys(
        "film novel novella album song tragedy comedy opera painting poem "
        "book symphony sculpture musical epic treatise manuscript sitcom "
        "franchise magazine newspaper".split(),
        "work",
    ),
    **dict.fromkeys(
        "device machine vehicle instrument tool technology engine aircraft airplane "
        "weapon apparatus invention computer telecommunications structure bridge "
        "building reactor".split(),
        "technology",
    ),
    **dict.fromkeys(
        "process phenomenon reaction cycle condition force effect mechanism behavior "
        "behaviour oscillation removal".split(),
        "process",
    ),
    **dict.fromkeys(
        "organ animal plant species genus tissue cell organism gland mammal bird fish "
        "insect ecosystem".split(),
        "living",
    ),
    **dict.fromkeys(
        "substance material compound element food drink beverage polymer molecule acid "
        "mineral metal preparation protein fluid rock magma".split(),
        "substance",
    ),
    **dict.fromkeys(
        "theory field discipline science study branch concept idea religion philosophy "
        "ideology doctrine practice method genre style language system art".split(),
        "concept",
    ),
}
_COPULA = re.compile(r"\b(?:is|was|are|were)\s+", re.IGNORECASE)
# The definition's noun phrase is read this far: "a 1948 Italian neorealist drama film".
_WINDOW = 12
_COLLECTIVE = frozenset(
    "series group type kind form set network collection pair sort family class body "
    "one number system".split()
)
_RELATIVE = frozenset("who which that whose whom where".split())
_PERSONAL = re.compile(r"\b(?:he|she|his|her|him)\b", re.IGNORECASE)
_NEUTER = re.compile(r"\b(?:it|its)\b", re.IGNORECASE)
_OPENS_PERSONAL = re.compile(r"(?:^|[.!?]\s+)(?:He|She)\s")


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and word[:-1] in _HEADS else word


def definition_kind(lead: str) -> Kind | None:
    """Return the kind named first after the first "is"/"was" of `lead`, within a few words."""
    copula = _COPULA.search(lead)
    if copula is None:
        return None
    # A capitalised word is part of a name ("the United States human spaceflight program").
    window = [w if w[:1].islower() else "" for w in re.findall(r"[\w'-]+", lead[copula.end() :])][
        :_WINDOW
    ]
    for i, word in enumerate(window):
        following = window[i + 1] if i + 1 < len(window) else ""
        if word == "state" and following == "of":
            return "process"  # "a state of reduced activity", not a country
        if (kind := _HEADS.get(_singular(word))) is not None:
            return kind
        # "founder of the Mongol Empire" names the founder's kind, not the empire's;
        # "a series of conflicts" names the conflicts'.
        if following == "of" and word not in _COLLECTIVE or word in _RELATIVE:
            return None
    return None


# A noun of a role or trade, the way English forms them: "explorer", "officer", "chemist",
# "physician", "historian" (shorter -er and -or words are more often others: "later",
# "other", "major"; other -ian words adjectives: "dystopian", "authoritarian").
_ROLE = re.compile(r"\w{4,}(?:er|or)|\w{2,}(?:ist|(?:c|g|or|ed)ian)")
# Where a definition's noun phrase ends before its head could come.
_PHRASE_ENDS = frozenset("by in from for with to on at as into under".split())
_PARTICIPLE = re.compile(r"\w(?:ed|ing)$")
_ARTICLES = frozenset({"The", "A", "An"})
# What may follow the head of a definition: its end, or more about it.
_AFTER_HEAD = frozenset({"", "and", "who", "whose"})
# A role is described by what it is known for or as, a few words on.
_KNOWN_AS = frozenset({"for", "as"})


def named_role(lead: str) -> bool:
    """Return whether `lead` defines a name by a role: "Joseph Pulitzer was a ... politician".

    The head is a noun of a role (`_ROLE`) where the phrase may end, before any noun of another
    kind ("a film director" is a person; "the first Slavic state and, later" is not).
    """
    copula = _COPULA.search(lead)
    if copula is None:
        return False
    # What is defined must be a name: capitalised words, a particle or two aside.
    defined = re.findall(r"[\w'-]+", lead[: copula.start()].split(",")[0])
    capitalised = [w for w in defined if w[:1].isupper()]
    if len(capitalised) < 2 or len(defined) - len(capitalised) > 2 or defined[0] in _ARTICLES:
        return False
    tokens = re.findall(r"[\w'-]+|,", lead[copula.end() :])[:_WINDOW]
    window = [w if w[:1].islower() or w == "," else "Name" for w in tokens] + [""]
    for i, (word, following) in enumerate(zip(window, window[1:], strict=False)):
        # "-ist" words are adjectives too: "the far-right, ultranationalist, racist ideology".
        listed = following == "," and not word.endswith("ist")
        # "a writer known primarily for", "an artist famous for": what the role is known as.
        described = _KNOWN_AS.intersection(window[i + 1 : i + 4])
        if _ROLE.fullmatch(word) and (following in _AFTER_HEAD or listed or described):
            return True
        if _singular(word) in _HEADS and not _ROLE.fullmatch(following):
            return False
        ended = following == "of" or word in _RELATIVE or word in _PHRASE_ENDS
        if ended or _PARTICIPLE.search(word):
            return False
    return False


@lru_cache(maxsize=4096)  # asked of the same article by every sentence and every judgement
def kind_of(text: str) -> Kind | None:
    """Return the kind of thing `text` (an article, its lead first) is about; None if unsure.

    A name defined by a role is a person; so is a name the text calls he or she more often
    than it, in a sentence of its own ("He ..."), whatever noun its definition has first
    ("a Swedish film and theatre director", "a Greek historian ... from the city of"), unless
    the definition is of a work by someone ("a 1955 novel by Vladimir Nabokov"). Else the
    definition's kind.
    """
    sentences = split_sentences(text)
    if not sentences:
        return None
    if named_role(sentences[0]):
        return "person"  # before the definition's other nouns: "a figure skater and film star"
    kind = definition_kind(sentences[0])
    personal = len(_PERSONAL.findall(text)) > len(_NEUTER.findall(text))
    a_name = sentences[0].split()[0] not in _ARTICLES
    spoken_of = _OPENS_PERSONAL.search(text) is not None
    creation = kind == "work" and " by " in sentences[0]
    if personal and (kind is None or a_name and spoken_of and not creation):
        return "person"
    return kind
