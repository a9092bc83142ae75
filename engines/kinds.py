"""What kind of thing an article is about, from how its first sentence defines it.

An encyclopedic lead says what its subject is: "The heart is a muscular organ",
"Bicycle Thieves ... is a 1948 Italian neorealist drama film", "Rosalind Franklin was an
English chemist". The head noun of that definition names the kind; an article that calls
its subject "he" or "she" is about a person. The planner picks points that fit the kind,
and the writer tells a film named after the subject from the subject itself.
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


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and word[:-1] in _HEADS else word


def definition_kind(lead: str) -> Kind | None:
    """The kind named first after the first "is"/"was" of `lead`, within a few words."""
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


def _defines_a_name(lead: str, copula: re.Match[str]) -> bool:
    """Whether what `lead` defines is a name: capitalised words, a particle or two aside."""
    defined = re.findall(r"[\w'-]+", lead[: copula.start()].split(",")[0])
    capitalised = [w for w in defined if w[:1].isupper()]
    return (
        len(capitalised) >= 2
        and len(defined) - len(capitalised) <= 2
        and (defined[0] not in _ARTICLES)
    )


def named_role(lead: str) -> bool:
    """Whether `lead` defines a person by the role they had.

    "Captain Robert Falcon Scott was a British naval officer and explorer", "Joseph
    Pulitzer was a Hungarian-American politician". What is defined is a name, and the head
    of the definition is a noun of a role (`_ROLE`) where the phrase may end, before any
    noun of another kind ("a film director" and "a newspaper publisher" are people; "the
    first Slavic state and, later" is not).
    """
    copula = _COPULA.search(lead)
    if copula is None or not _defines_a_name(lead, copula):
        return False
    tokens = re.findall(r"[\w'-]+|,", lead[copula.end() :])[:_WINDOW]
    window = [w if w[:1].islower() or w == "," else "Name" for w in tokens] + [""]
    for word, following in zip(window, window[1:], strict=False):
        # "-ist" words are adjectives too: "the far-right, ultranationalist, racist ideology".
        listed = following == "," and not word.endswith("ist")
        if _ROLE.fullmatch(word) and (following in _AFTER_HEAD or listed):
            return True
        if _singular(word) in _HEADS and not _ROLE.fullmatch(following):
            return False
        if following == "of" or word in _RELATIVE or word in _PHRASE_ENDS:
            return False
        if _PARTICIPLE.search(word):
            return False
    return False


@lru_cache(maxsize=4096)  # asked of the same article by every sentence and every judgement
def kind_of(text: str) -> Kind | None:
    """The kind of thing `text` (an article, its lead first) is about; None if unsure.

    A name defined by a role is a person (`named_role`); otherwise the definition decides
    when it names a kind, else a text that calls its subject he or she more often than it
    is about a person.
    """
    sentences = split_sentences(text)
    if not sentences:
        return None
    if named_role(sentences[0]):
        return "person"  # before the definition's other nouns: "a figure skater and film star"
    kind = definition_kind(sentences[0])
    if kind is None and len(_PERSONAL.findall(text)) > len(_NEUTER.findall(text)):
        return "person"
    return kind
