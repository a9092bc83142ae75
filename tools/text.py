"""Word-level text helpers shared by the search index and the extractive engine."""

import math
import re
import threading
from collections import Counter
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each either else ever few for from further had hadn't has
    hasn't have haven't having he her here hers herself him himself his how however i if in into
    is isn't it it's its itself just let's may me might more most much must my myself no nor not
    now of off on once only or other ought our ours ourselves out over own per same shall she
    should shouldn't so some such than that that's the their theirs them themselves then there
    there's these they this those through thus to too under until up upon us very was wasn't we
    were weren't what what's when where which while who whom whose why will with within without
    won't would wouldn't yet you your yours yourself yourselves
    """.split()
)

# Words that shape a question rather than name its matter ("how X works", "the causes of
# X", "X versus Y"): searched like any word, but never what a question is about.
FORM_WORDS = frozenset(
    """
    work works working function functions happen happened made make makes cause causes caused
    effect effects impact impacts influence role roles history histories origin origins rise
    fall differ differs difference differences different compare compared comparison versus vs pro pros con
    cons advantage advantages disadvantage disadvantages benefit benefits importance
    significance meaning overview explained explain introduction basics life legacy invent
    invented invention inventor discover discovered discovery tell describe
    """.split()
)

# A Snowball stemmer keeps the word it works on in itself: one per thread (the local
# corpus ranks in worker threads while the event loop's thread stems too).
_stemmers = threading.local()


def written_words(text: str) -> list[str]:
    """Return the words of `text` as written, apostrophes kept inside words."""
    return list(_WORD.findall(text))


def word_matches(text: str) -> list[re.Match[str]]:
    """Return the words of `text` (`written_words`, one for one) with where each stands."""
    return list(_WORD.finditer(text))


def words(text: str) -> list[str]:
    """Return the lower-cased words of `text` (`written_words`, one for one)."""
    return [w.lower().replace("’", "'") for w in written_words(text)]


_POSSESSIVE = re.compile(r"['’]s$")


def without_possessive(word: str) -> str:
    """Return the word without a possessive "'s": "DNA's" -> "DNA"."""
    return _POSSESSIVE.sub("", word)


# English nouns whose plural is not the singular and an "s": a grammar's table. "lives"
# and "leaves" are verbs too; read as the nouns, a text that uses the verb names the noun.
_IRREGULAR_PLURALS = {
    "leaves": "leaf", "wolves": "wolf", "knives": "knife", "wives": "wife", "lives": "life",
    "halves": "half", "calves": "calf", "loaves": "loaf", "thieves": "thief",
    "shelves": "shelf", "selves": "self", "elves": "elf", "hooves": "hoof", "scarves": "scarf",
    "men": "man", "women": "woman", "children": "child", "mice": "mouse", "lice": "louse",
    "geese": "goose", "teeth": "tooth", "feet": "foot", "oxen": "ox",
    "fungi": "fungus", "cacti": "cactus", "nuclei": "nucleus", "radii": "radius",
    "stimuli": "stimulus", "bacteria": "bacterium", "criteria": "criterion",
    "phenomena": "phenomenon", "larvae": "larva", "algae": "alga", "antennae": "antenna",
    "vertebrae": "vertebra", "nebulae": "nebula", "indices": "index", "matrices": "matrix",
    "vertices": "vertex", "crises": "crisis", "analyses": "analysis",
    "hypotheses": "hypothesis", "theses": "thesis", "oases": "oasis", "diagnoses": "diagnosis",
}  # fmt: skip
_IRREGULAR_SINGULARS = {singular: plural for plural, singular in _IRREGULAR_PLURALS.items()}


def number_forms(word: str) -> tuple[str, str] | None:
    """Return an irregular noun's singular and plural, of either: ("leaf", "leaves").

    None for any other word: its plural is the stem's business.
    """
    lowered = word.lower()
    if lowered in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[lowered], lowered
    if lowered in _IRREGULAR_SINGULARS:
        return lowered, _IRREGULAR_SINGULARS[lowered]
    return None


@lru_cache(maxsize=65_536)
def fold(word: str) -> str:
    """Return the word lower-cased without a plural "s" or a possessive "'s".

    "countries" -> "country", "Babbage's" -> "babbage", "glass" stays, "leaves" -> "leaf"
    (`number_forms`). Lighter than a stem, so "humans" is not "humanism".
    """
    lowered = without_possessive(word.lower()).replace("’", "'")
    if lowered in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[lowered]
    if len(lowered) <= 3 or not lowered.endswith("s") or lowered.endswith(("ss", "us", "is")):
        return lowered
    if lowered.endswith("ies") and len(lowered) > 4:
        return lowered[:-3] + "y"  # "countries"
    if lowered.endswith(("sses", "ches", "shes", "xes")) or (
        lowered.endswith("oes") and len(lowered) > 5
    ):
        return lowered[:-2]  # "churches", "volcanoes"
    return lowered[:-1]


@lru_cache(maxsize=65_536)
def base_form(word: str) -> str:
    """Return a word without its inflection, and nothing more: "explained" -> "explain".

    Names are compared with this, words of meaning with `stem` (which takes derivations
    too: "Titanic" -> "titan"). A final "e" goes, so "making" and "make" meet.
    """
    base = fold(word)
    for ending in ("ing", "ed"):
        if base.endswith(ending) and len(base) - len(ending) >= 3:
            base = base[: -len(ending)]
            if base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # "stopped"
            break
    return base[:-1] if base.endswith("e") and len(base) > 3 else base


def movement_forms(word: str) -> tuple[str, str] | None:
    """Return a movement's word and its follower's, of either: "impressionist" gives both.

    The stemmer keeps them apart ("existentialist", "existenti") and cuts "existentialism"
    to what "existential" is too; None for any other word, and for short ones ("artist").
    """
    single = word[:-1] if word.endswith(("isms", "ists")) else word
    for ending in ("ism", "ist"):
        root = single[: -len(ending)]
        # "consist" and "persist" are verbs, not followers.
        if single.endswith(ending) and len(root) >= 4 and not root.endswith("s"):
            return f"{root}ism", f"{root}ist"
    return None


def folded(text: str) -> list[str]:
    """Return every word of `text`, folded; stopwords kept so phrases compare word for word."""
    return [fold(w) for w in words(text)]


def content_words(text: str, keep_case: bool = False) -> list[str]:
    """Return the words that carry meaning: no stopwords, no single letters but digits.

    Lower-cased unless `keep_case`; a digit counts: "Symphony No. 3" is not "No. 5".
    """
    found = _WORD.findall(text) if keep_case else words(text)
    return [w for w in found if w.lower() not in STOPWORDS and (len(w) > 1 or w.isdigit())]


# A request around the topic: "tell me everything about X", "can you explain how X works",
# "I'd like to know more about X", "write a report on X"; and "X simply", "X for beginners".
_REQUEST = re.compile(
    r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:"
    r"(?:i(?:'d|\s+would)\s+like|i\s+(?:want|need))\s+to\s+(?:know|learn|read|understand)"
    r"|(?:tell|teach|show|give)\s+me|write(?:\s+me)?"
    r"|explain(?:\s+to\s+me)?|describe|summari[sz]e|investigate"
    # Nouns too ("research methods", "outline of history"): a verb before a name, an article
    # or a question.
    r"|(?:research|outline)(?=\s+(?:the|a|an|how|why|what|who|when|where|which)\b|\s+(?-i:[A-Z]))"
    r")(?:\s+(?:everything|more|something|all|a\s+(?:bit|little)))?"
    r"(?:\s+(?:an?|the)?\s*(?:overview|summary|report|essay|explanation|introduction)"
    r"\s+(?:of|on|about|to))?"
    r"(?:\s+(?:about|on|of|regarding))?\s+(?P<s>\S.*)$",
    re.IGNORECASE,
)
# A request made as a noun phrase: "a beginner's guide to X", "a short introduction to X"
# (in lower case: not "The Hitchhiker's Guide to the Galaxy").
_GUIDE = re.compile(
    r"^(?:an?|the|my)\s+(?:[\w-]+['’]s?\s+|[\w-]+\s+){0,2}?(?-i:guide|introduction|primer|crash\s+course)"
    r"\s+(?:to|on|about)\s+(?P<s>\S.*)$",
    re.IGNORECASE,
)
_FOR_WHOM = re.compile(
    r"\s+(?:simply|briefly|in\s+(?:simple|plain)\s+(?:terms|words|english)"
    r"|for\s+(?:beginners|kids|children|dummies)|to\s+an?\s+(?:child|kid|beginner))$",
    re.IGNORECASE,
)
# What a keyword topic calls the report it asks for: "volcano facts", "jazz 101", "the
# Renaissance explained", "a list of Greek philosophers".
_REPORT_AFTER = re.compile(
    r"(?<=\S)\s+(?:facts|explained|overview|basics|summary|101|in\s+a\s+nutshell)$",
    re.IGNORECASE,
)
_REPORT_BEFORE = re.compile(
    r"^(?:an?\s+|the\s+)?(?:list|timeline|summary)\s+of\s+(?=\S)", re.IGNORECASE
)


def without_request(topic: str) -> str:
    """Return the topic without a request wrapped around it ("tell me about X": X)."""
    match = _REQUEST.match(topic) or _GUIDE.match(topic)
    asked = match.group("s") if match else topic
    asked = _REPORT_AFTER.sub("", _FOR_WHOM.sub("", asked))
    return _REPORT_BEFORE.sub("", asked) or topic


def keyword_query(topic: str) -> str:
    """Return the content words of the topic as one search query, no request around it."""
    return " ".join(content_words(without_request(topic), keep_case=True))


# Where a question joins the things it asks about: "X and Y", "X vs Y", "X, and who Y".
_JOINS = re.compile(r"[,;:?!/]|\b(?:and|or|vs|versus|between|compared|than|with)\b", re.IGNORECASE)


def topic_parts(text: str) -> list[str]:
    """Return the things a question joins, each as a keyword query; none for a question of one.

    "capitalism and socialism" asks about both, "Mount Everest, and who first reached its
    summit" about the mountain and its ascent; the words of `FORM_WORDS` are left out, and so
    is what relates the things "between" names ("the link between diet and disease").
    """
    parts: list[str] = []
    for piece in _JOINS.split(_BETWEEN.sub(" between", text)):
        kept = [w for w in content_words(piece, keep_case=True) if w.lower() not in FORM_WORDS]
        if kept and parts and _BACK_REFERENCE.search(piece):
            kept = [parts[0], *kept]  # "who discovered its structure": DNA's structure
        if kept:
            parts.append(" ".join(kept))
    return list(dict.fromkeys(parts)) if len(parts) > 1 else []


def compared_parts(text: str) -> list[str]:
    """Return the things a topic compares ("chess versus go", "how does X differ from Y")."""
    if not _COMPARING.search(text):
        return []
    return topic_parts(re.sub(r"\bfrom\b", ",", text))  # "X differs from Y"


_COMPARING = re.compile(
    r"\b(?:vs\.?|versus|compared?|comparing|comparison|differ\w*|between|than)\b", re.IGNORECASE
)


# What a clause says is "between" the things it names: "the relationship between X and Y".
_BETWEEN = re.compile(r"(?:^|(?<=[,;:?!]))[^,;:?!]*?\bbetween\b", re.IGNORECASE)

# A later part of a question that speaks of the first part's subject ("... and who first
# reached its summit").
_BACK_REFERENCE = re.compile(r"\b(?:its|it|their|they|them|his|he|him|her|she)\b", re.IGNORECASE)


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """Return the Snowball (Porter 2) stem of one lower-cased word; safe in any thread.

    A follower's word stems as its movement's (`movement_forms`): "existentialist" is of
    existentialism's family, as "existential" already is; an irregular plural as its
    singular ("leaves" as "leaf").
    """
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    word = _IRREGULAR_PLURALS.get(word, word)
    forms = movement_forms(word)
    return str(stemmer.stemWord(forms[0] if forms else word))


def stems(text: str) -> list[str]:
    """Return the stems of the content words of `text`."""
    return [stem(w) for w in content_words(text)]


def cosine(a: Counter[str], b: Counter[str], idf: dict[str, float] | None = None) -> float:
    """Return the cosine of two word counts, each word weighted by `idf` (1.0 when absent)."""
    weight = idf or {}
    dot = sum(a[t] * b[t] * weight.get(t, 1.0) ** 2 for t in a.keys() & b.keys())
    if not dot:
        return 0.0
    norm_a = math.sqrt(sum((v * weight.get(t, 1.0)) ** 2 for t, v in a.items()))
    norm_b = math.sqrt(sum((v * weight.get(t, 1.0)) ** 2 for t, v in b.items()))
    return dot / (norm_a * norm_b)
