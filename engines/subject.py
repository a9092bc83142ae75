"""The subject of a topic: the phrase a question is about, whatever its shape.

A frame recognises a question's shape ("history of X", "why did X fall", "who was X", "how
X works") only to take the subject out of it, without the words wrapped around it ("the
biology of cats" is about cats, "Buddhism in Asia" about Buddhism). What is searched and
written never depends on the shape: the topic's own words lead every plan
(`nodes.supervisor.led_by_topic`) and sections follow the evidence (`engines.extractive`).
"""

import re
from dataclasses import dataclass

from tools.text import content_words, without_request

# Fields of study and of making: "the biology of X" asks X of one; "inflation in economics"
# says which inflation.
_FIELDS = (
    "biology|chemistry|physics|science|economics|politics|psychology|geography|philosophy|"
    "culture|art|music|language|literature|technology"
)
# "the biology of X", "the structure of X": a field or facet of the subject, not the subject.
_FACETS = rf"{_FIELDS}|structure|role|importance|meaning|nature|basics|principles|theory"
_FACET_OF = re.compile(rf"^(?:the\s+)?(?P<f>{_FACETS})\s+of\s+(?P<s>.+)$", re.IGNORECASE)
# "key ideas of X", "the main features of X", "famous paintings by X": plural facets of one
# subject, in lower case but for a first word that opens a sentence (not "Houses of
# Parliament").
_FACETS_OF = re.compile(
    r"^(?:[Tt]he\s+)?(?:[A-Za-z][a-z]*\s+)??(?:[a-z]+\s+){0,2}?(?P<h>[A-Za-z][a-z]+)\s+(?:of|by)\s+"
    r"(?P<s>.+)$"
)
# "the life cycle of a star", "the parts of a flower": what is asked of any one of a kind
# (not "the fall of the Roman Empire": a thing of its own, nor "the Statue of Liberty").
_OF_A_KIND = re.compile(r"^(?:the\s+)?(?:[a-z]+\s+){1,3}?of\s+an?\s+(?P<s>[a-z].*)$")
# "facts about X", "the science behind X", "what's so special about X": what it is about
# (the preposition in lower case: not "Much Ado About Nothing").
_ABOUT = re.compile(r"^\S.*?\s+(?:about|behind|regarding|concerning)\s+(?P<s>\S.*)$")
# "the pros and cons of X", "the gods and heroes of X": two facets of one subject.
# (The first word may open a sentence; the second is lower case: not "Romeo and Juliet".)
_PAIR_OF = re.compile(r"^(?:[Tt]he\s+)?[A-Za-z][a-z]*\s+and\s+[a-z]+\s+of\s+(?P<s>.+)$")
# "X's rise and fall", "DNA's structure": the possessor is the subject.
_POSSESSOR = re.compile(r"^(?P<s>.+?)['’]s?\s+\S.*$")
POSSESSIVE_AFTER = re.compile(r"^['’]s?\s")
# "Buddhism in Asia", "the Mongol Empire under Genghis Khan": the subject comes first.
_SETTING_WORD = r"(?:in|on|under|during|across|throughout)"
_SETTING = re.compile(rf"^(?P<s>.+?)\s+{_SETTING_WORD}\s+\S.*$", re.IGNORECASE)


# Adverbs that open what is said of a subject: "still read today", "so famous", "no longer".
_ADVERBS = set(
    "so very too still always never often ever really no not now usually sometimes already "
    "also just quite rarely seldom generally mostly".split()
)
_AUXILIARY = set("does do did can is are was were could would should will has have had".split())
_HAVE = {"has", "have", "had"}
_PRONOUNS = {"we", "you", "they", "i", "it", "there", "people", "humans"}
_PERSONAL = {"i", "you", "we", "they", "it"}
# Prepositions and the particles of phrasal verbs ("come from", "take off", "break down").
_PARTICLES = set(
    "from of for with to about in on at by up out off down over away back apart".split()
)
_PLACING = {"in", "on", "at", "during", "after", "before", "under"}
# Articles, and the copulas that say what a subject is ("A hurricane is ...").
ARTICLES = frozenset({"the", "a", "an"})
COPULAS = frozenset({"is", "are", "was", "were"})
# The words after which an article stays inside the subject: "the fall of the Roman Empire".
_LINKING = {"of", "and", "&", "in", "on", "at", "for", "to", "from", "with", "by"}
_PROCESS_VERBS = {"works", "work", "functions", "happens", "operates", "began", "started"}


def plural(word: str) -> bool:
    """Return whether the word is a plural noun, most likely ("vaccines", not "virus" or "is")."""
    lowered = word.lower()
    return len(lowered) > 3 and lowered.endswith("s") and not lowered.endswith(("ss", "us", "is"))


def _participle(word: str) -> bool:
    """Return whether the word is most likely a past participle ("made", "formed", "built")."""
    lowered = word.lower()
    return lowered.endswith(("ed", "en", "wn")) or lowered in _IRREGULAR_PARTICIPLES


# The participles of the common irregular verbs that end in neither -ed nor -en.
_IRREGULAR_PARTICIPLES = set(
    "made built done born held found kept left lost meant paid said sold sent spent taught "
    "told thought brought bought caught fought won run sung drunk hung dug shot struck "
    "spun set put cut shut hit split spread burnt learnt felt dealt heard read led fed bred "
    "bent lent lit met slept swept wept stood understood".split()
)


def _after_pronoun(words: list[str], copula: bool) -> str:
    """Return what a question asks about when a pronoun stands as its subject; "" if unknown.

    "is there life on Mars": what follows "there"; "is it safe to eat raw eggs": the object
    of the verb after "to"; "should I drink green tea", "how do we measure distance": the
    object of the verb after the pronoun; "why do we dream": the verb, when nothing follows.
    "it" otherwise stands for something named before ("why does it matter"): unknown.
    """
    rest = words[1:]
    first = rest[0].lower() if rest else ""
    # "what happens if you don't sleep"; not "have" that is the verb ("why do we have leap
    # years"): only before a participle is it an auxiliary.
    verb = first in _HAVE and not (rest[1:] and _participle(rest[1]))
    if (first in _AUXILIARY or first.endswith("n't")) and not verb:
        rest = rest[1:]
    while len(rest) > 1 and rest[0].lower() in _ADVERBS:
        rest = rest[1:]  # "why do we still use the QWERTY keyboard"
    if "to" in (w.lower() for w in rest):
        at = [w.lower() for w in rest].index("to")
        if len(rest) > at + 2:
            return " ".join(rest[at + 2 :])
    if words[0].lower() == "there" and copula:
        return " ".join(rest)
    if words[0].lower() == "it":
        return ""
    return " ".join(rest[1:] if len(rest) > 1 else rest)


def _measure(words: list[str]) -> int:
    """Return how many words ask a measure before the auxiliary, 0 if none.

    "how dangerous are volcanoes", "how long do cats live", "how many moons does Jupiter
    have": a word that is no plural noun, or two that open with no article, then an
    auxiliary that more than one word follows, or a name, a plural or a word that is no past
    participle ("how old is Rome", "how tall are giraffes", "how fast is light"); not "how
    vaccines are made", "how paper is made" nor "how the pyramids were built", where the
    subject comes first.
    """
    at = next((i for i, w in enumerate(words[:3]) if w.lower() in _AUXILIARY), 0)
    after = words[at + 1 :]
    subject_first = plural(words[0]) if at == 1 else words[0].lower() in ARTICLES
    if at == 0 or subject_first or not after:
        return 0
    named = len(after) > 1 or after[0][:1].isupper() or plural(after[0])
    return at if named or not _participle(after[0]) else 0


def how_subject(rest: str) -> str:
    """Return the subject of "how ..." or "why ...": "how does X work", "why did X fall".

    After an auxiliary (after "how" and a measure: "how big is the sun", "how long do cats
    live"), the subject ends before an article that opens what is said of it ("is Pluto a
    planet"; not one after "of": "the fall of the Roman Empire"; after a verb, before the
    verb: "does the moon have a core"), with its first plural noun, or before a verb whose
    object is plural, or before the last of three words ("why did the Qing dynasty fall");
    a longer phrase stays whole; a pronoun is no subject ("should I drink green tea": green
    tea). Without an auxiliary first, it ends before one ("how paper is made"), before a
    process verb, or with its first plural noun ("how vaccines train ..."), or before the
    last word ("how airplanes fly"); "how to grow tomatoes" is about what the verb is done to.
    """
    words = rest.split()
    if len(words) > 2 and words[0].lower() == "to":
        return " ".join(words[2:])  # "how to grow tomatoes": what the verb is done to
    pronoun = _after_pronoun(words, False) if words[0].lower() in _PERSONAL else ""
    if pronoun:
        return pronoun  # "if you don't sleep": sleep
    measure = _measure(words)
    measured = measure > 0
    words = words[measure:]
    if words and words[0].lower() in _AUXILIARY:
        copula = words[0].lower() in COPULAS
        perfect = words[0].lower() in _HAVE
        words = words[1:]
        pronoun = _after_pronoun(words, copula) if words and words[0].lower() in _PRONOUNS else ""
        if pronoun:
            return pronoun
        participles = [i for i, w in enumerate(words) if i > 0 and _participle(w)]
        if perfect and participles:
            return " ".join(words[: participles[-1]])  # "how has medicine changed over time"
        # After a copula, what is said of it may open with an adverb ("why is Shakespeare
        # still read", "why is the Mona Lisa so famous") or a participle in lower case ("why
        # was the Titanic considered unsinkable"). (After "did" the verb may come first: "did
        # the Black Death spread so fast".)
        if copula:
            ends = [i for i, w in enumerate(words) if i > 0 and w.lower() in _ADVERBS]
            ends += [i for i in participles if words[i].islower()]
            if ends:
                return " ".join(words[: min(ends)])
        place = next((i for i, w in enumerate(words) if i > 1 and w.lower() in _PLACING), None)
        words = words[:place]  # "why did Constantinople fall in 1453"
        while len(words) > 1 and words[-1].lower() in _PARTICLES:
            words = words[:-1]  # "where does rain come from": the verb's, not the subject's
        said = next(
            (
                i
                for i, w in enumerate(words)
                if i > 0 and w.lower() in ARTICLES and words[i - 1].lower() not in _LINKING
            ),
            None,
        )
        if copula and (said is not None or measured):
            # "is the Sahara a desert": what it is follows; "how big is the sun": it was asked
            return " ".join(words[:said])
        words = words[:said]  # "does the moon have a core": the verb is left to take off
        first = next((i for i, w in enumerate(words[:-1]) if plural(w)), None)
        if first is not None:
            return " ".join(words[: first + 1])
        # After "do" or "does" the verb has no plural ending: a plural last is its object,
        # the word before it the verb ("how does the brain store memories").
        if len(words) > 2 and plural(words[-1]):
            return " ".join(words[:-2])
        # Where the verb is is not known past a few words: "did the steam engine change ...".
        named = [w for w in words if w.lower() not in ARTICLES]
        return " ".join(words if len(named) > 3 else words[:-1] or words)
    for i, word in enumerate(words):
        if i > 0 and word.lower() in _AUXILIARY:
            return " ".join(words[:i])  # "how paper is made"
        if word.lower() in _PROCESS_VERBS and i > 0:
            return " ".join(words[:i])
        if (
            i + 1 < len(words)
            and len(word) > 3
            and word.lower().endswith("s")
            and not word.lower().endswith("ss")
        ):
            return " ".join(words[: i + 1])
        if i > 0 and i + 1 < len(words) and word.islower() and _participle(word):
            return " ".join(words[:i])  # "how Galileo used the telescope"
    return " ".join(words[:-1] or words)


def core_subject(phrase: str) -> str:
    """Return the subject of a noun phrase, without a facet, possessor or setting around it."""
    subject = " ".join(phrase.split())
    for pattern in (_FACET_OF, _PAIR_OF, _POSSESSOR, _SETTING):
        match = pattern.match(subject)
        if match and match.group("s").strip():
            subject = match.group("s").strip()
    return re.sub(r"^(?:the|a|an)\s+", "", subject, flags=re.IGNORECASE)


def _around_subject(text: str) -> tuple[str, str, str, str] | None:
    """Return the frame's name, the text before the subject, the subject as written, the rest.

    None when the subject is not written in `text` as found (a rewritten "how" subject).
    """
    frame, subject = match_frame(text)
    at = text.casefold().find(subject.casefold())
    if at < 0:
        return None
    end = at + len(subject)
    return frame.name, text[:at], text[at:end], text[end:]


def without_setting(topic: str) -> str:
    """Return the topic without the setting that follows its subject.

    "the effects of the Black Death in Europe" asks about the Black Death: Europe is where,
    not what. A question in two parts is about both: "why did it start in Florence".
    """
    around = _around_subject(topic)
    if around is None or _SECOND_PART.search(around[2]):
        return topic
    _, before, subject, after = around
    return before + subject if _SETTING_FOLLOWS.match(after) else topic


def setting_of(topic: str) -> str:
    """Return the place or time the topic sets its subject in; "" if none.

    "Japan" in "religion in Japan", "Mars" in "could life exist on Mars". Nothing for a
    question in two parts, which is about both.
    """
    around = _around_subject(topic) if topic else None
    if around is None or _SECOND_PART.search(around[2]) or _SECOND_PART.search(topic, 1):
        return ""
    found = re.search(rf"\b{_SETTING_WORD}\s+(?P<s>\S.*?)\??$", around[3], re.IGNORECASE)
    return core_subject(found.group("s")) if found else ""


# A setting right after the subject: " in Europe", " under Genghis Khan".
_SETTING_FOLLOWS = re.compile(rf"\s+{_SETTING_WORD}\s+\S", re.IGNORECASE)


def verbs_of(topic: str) -> set[str]:
    """Return the verbs a question puts after its subject, in each of its parts.

    "fly" in "how airplanes fly", "go" in "why did the dinosaurs go extinct", "eat" in "can
    dogs eat chocolate", "matter" in "what is photosynthesis and why does it matter"; after
    "is" or "are" only a participle ("read" in "why is Shakespeare still read today"; "why
    is the sky blue": blue is no verb).
    """
    found: set[str] = set()
    for start in [0, *(m.start() for m in _SECOND_PART.finditer(topic) if m.start() > 0)]:
        around = _around_subject(topic[start:])
        if around is None or around[0] not in _ASKS_AFTER:
            continue
        _, before, _, after = around
        said = re.findall(r"[\w'’-]+", after)
        if any(w.lower() in COPULAS for w in before.split()[:2]):
            # "why is the sky blue", "is coffee bad for you": no verb; but a participle is
            # one ("why is Shakespeare still read today").
            said = [w for w in said if w.lower() not in _ADVERBS]
            found.update(w for w in said[:1] if w.islower() and _participle(w))
            continue
        if said[:1] and said[0].lower() in COPULAS and not _participle(said[1] if said[1:] else ""):
            continue  # "how come the sky is blue"
        verbs = [w for w in said if w.lower() not in _AUXILIARY]
        found.update(verbs[:1])  # "made" in "how paper is made"
    return found


def asked_of_subject(topic: str) -> str:
    """Return what the topic asks of its subject, in the words after it; "" if none.

    "feel pain" in "do plants feel pain", "fall" in "why did Rome fall", "a sport" in "is
    chess a sport". Nothing for a phrase ("jazz origins new orleans") nor a question in two
    parts, which is about both.
    """
    around = _around_subject(topic) if topic else None
    if around is None or _SECOND_PART.search(topic, 1):
        return ""
    name, _, _, after = around
    return after.strip(" ?") if name in _ASKS_AFTER else ""


def facet_asked(topic: str, subject: str = "") -> str:
    """Return what a topic of no question shape asks of its subject, before it; "" if none.

    "biology" in "the biology of sleep", "life cycle" in "the life cycle of a star", "myths"
    in "common myths about the Middle Ages", "climate" of Antarctica (`subject`, where the
    topic's subject was found to be what it is of); after a possessor, what it has
    ("Napoleon's greatest battles"): no thing of its own the topic names (`relevance`), but
    what it asks of one.
    """
    around = _around_subject(without_request(topic)) if topic else None
    if around is None or around[0] != "overview":
        return ""
    before, found, after = around[1], around[2], around[3]
    at = found.casefold().rfind(subject.casefold()) if subject else -1
    if at >= 0:
        # "climate of" Antarctica; Stendhal's "novels" in "stendhal novels".
        before += f"{found[:at]} {found[at + len(subject) :]}"
    if POSSESSIVE_AFTER.match(after):
        # Napoleon's "greatest battles"; past a name written with a possessive, what
        # follows it: "Parkinson's disease" "symptoms".
        longer = apostrophes(subject).startswith(apostrophes(found))
        before += after[len(subject) - len(found) if longer else 0 :]
    return " ".join(content_words(before))


def apostrophes(text: str) -> str:
    """Return the text in lower case with one apostrophe for both ("Hadrian’s", "Hadrian's")."""
    return text.casefold().replace("’", "'")


def is_field(phrase: str) -> bool:
    """Whether the phrase is the name of a field ("economics"), as a setting says which X."""
    return re.fullmatch(_FIELDS, phrase, re.IGNORECASE) is not None


def is_wrapped(phrase: str) -> bool:
    """Whether a facet ("the biology of") or a possessor ("X's") wraps the subject."""
    return bool(_FACET_OF.match(phrase) or _PAIR_OF.match(phrase) or _POSSESSOR.match(phrase))


def _unwrapped(phrase: str) -> str:
    """Return what a phrase with no question shape is about: "facts about X", "key ideas of X".

    Only there: a shape has taken its own facet off already ("effects of the atomic bombings
    of Hiroshima" are the bombings').
    """
    about = _ABOUT.match(phrase)
    phrase = about.group("s") if about else phrase
    kind = _OF_A_KIND.match(phrase)
    if kind is not None:
        return kind.group("s")
    facets = _FACETS_OF.match(phrase)
    if facets is None or not plural(head := facets.group("h")):
        return phrase
    named = head[0].isupper() and facets.group("s")[:1].isupper()  # "Houses of Parliament"
    return phrase if named else facets.group("s")


@dataclass(frozen=True, slots=True)
class Frame:
    """A topic shape: its name, and the pattern that finds the subject in it."""

    name: str
    pattern: re.Pattern[str]


FRAMES: tuple[Frame, ...] = (
    Frame(
        "history",
        re.compile(
            r"^(?:a\s+|the\s+)?(?:brief\s+)?(?:history|story|invention|discovery|development"
            r"|evolution|rise(?:\s+and\s+fall)?|spread|origins?)\s+of\s+(?P<s>.+)$",
            re.IGNORECASE,
        ),
    ),
    Frame(
        "causes",
        re.compile(
            r"^(?:(?:the\s+)?(?:main\s+|root\s+)?(?:causes?|reasons?\s+for)(?:\s+and\s+[a-z]+)?\s+(?:of\s+)?"
            r"|what\s+(?:caused|causes|led\s+to)\s+)(?P<s>.+?)(?:\s+happen)?$",
            re.IGNORECASE,
        ),
    ),
    Frame(
        "effects",
        re.compile(
            r"^(?:the\s+)?(?:effects?|impacts?|consequences?|influence)\s+of\s+(?P<s>.+)$",
            re.IGNORECASE,
        ),
    ),
    Frame(
        "person",
        re.compile(
            r"^(?:(?:the\s+)?(?:life(?:\s+and\s+\w+)?|biography|career)"
            r"\s+of\s+|who\s+(?:was|is|were)\s+)(?P<s>.+?)\??$",
            re.IGNORECASE,
        ),
    ),
    Frame(
        "how",
        re.compile(r"^how\s+(?:come\s+)?(?P<s>.+?)\??$", re.IGNORECASE),  # "how come X": why
    ),
    # "why did X fall", "why are Xs getting stronger", "what did X discover": X, as in "how
    # does X work".
    Frame(
        "why",
        re.compile(
            r"^(?:why\s+|(?:what|who|where|when)\s+(?=(?:did|does|do)\s))(?P<s>.+?)"
            r"(?:\s+happen)?\??$",
            re.IGNORECASE,
        ),
    ),
    # "what would happen if the moon disappeared": the subject of the clause.
    Frame(
        "what-if",
        re.compile(
            r"^what\s+(?:(?:would|will|could|might)\s+)?(?:happens?\s+|happened\s+)?"
            r"(?:if|when)\s+(?P<s>.+?)\??$",
            re.IGNORECASE,
        ),
    ),
    # "who painted X", "what happened at X", "what made X a power": X, up to a second part.
    Frame(
        "what",
        re.compile(
            r"^(?:what|who|which)\s+(?!(?:is|are|was|were|do|does|did|can|could|will|would"
            r"|should|has|have|had)\b)\w+\s+(?:(?:at|in|on|to|of|about|with|during|after|before)\s+)?"
            r"(?P<s>.+?)(?:,|\s+and\s|\s+an?\s|\?|$)",
            re.IGNORECASE,
        ),
    ),
    # "do bees sleep", "is Pluto a planet", "can dogs eat chocolate": X, as in "how does X
    # work" (the subject follows the auxiliary).
    Frame(
        "yes-no",
        re.compile(
            r"^(?P<s>(?:is|are|was|were|do|does|did|can|could|should|will|would|has|have|had)"
            r"\s+.+?)\??$",
            re.IGNORECASE,
        ),
    ),
    Frame(
        "overview",
        re.compile(
            r"^(?:what\s+(?:is|are|was|were)\s+|about\s+|an?\s+overview\s+of\s+)?(?P<s>.+?)\??$",
            re.IGNORECASE,
        ),
    ),
)


# The frames whose subject is followed by what is asked of it ("why did Rome fall").
_ASKS_AFTER = ("how", "why", "what-if", "yes-no")

# Where a question's second part begins: "what causes X and where do they happen".
_SECOND_PART = re.compile(r"\b(?:what|who|where|when|why|how|which)\b", re.IGNORECASE)


# "what was life like in ancient Rome": "like" asks what it was, and is no part of it.
_WHAT_LIKE = re.compile(r"^what\s+(?:is|are|was|were)\s+\S.*?\s+like(?:\s|$)", re.IGNORECASE)

# "what's", "who's": the copula is read as written out.
_CONTRACTED = re.compile(r"\b(what|who|where|how)['’]s\b", re.IGNORECASE)


def wrapped_phrase(topic: str) -> str:
    """Return the noun phrase of a topic of no question shape, as written ("pyramids of giza").

    Its facet, possessor or setting still on, its article off; "" for a question.
    """
    frame, _ = match_frame(topic)
    if frame.name != "overview":
        return ""
    found = frame.pattern.match(_cleaned(topic))
    return re.sub(r"^(?:the|a|an)\s+", "", found.group("s"), flags=re.IGNORECASE) if found else ""


def _cleaned(topic: str) -> str:
    """Return the topic as the frames read it: one space, no request, "what's" written out."""
    return without_request(_CONTRACTED.sub(r"\1 is", " ".join(topic.split()).rstrip(".!?")))


def match_frame(topic: str) -> tuple[Frame, str]:
    """Return the first frame whose pattern matches, and the subject it found."""
    cleaned = _cleaned(topic)
    for frame in FRAMES:
        match = frame.pattern.match(cleaned)
        if match:
            found = match.group("s")
            if frame is not FRAMES[-1] and _SECOND_PART.search(found):
                continue  # a question in two parts is about both: no frame takes one
            asks_after = frame.name in _ASKS_AFTER
            subject = core_subject(how_subject(found) if asks_after else found)
            if frame.name == "overview":  # no question shape: a facet may still wrap it
                subject = core_subject(cleaned) if is_wrapped(cleaned) else subject
                subject = core_subject(_unwrapped(subject))
                described = re.match(r"(?P<s>.+?)\s+like(?:\s|$)", subject)
                if _WHAT_LIKE.match(cleaned) and described:  # "what was life like"
                    if described.group("s").lower() not in _PRONOUNS:
                        subject = described.group("s")
            return frame, subject or cleaned
    return FRAMES[-1], cleaned
