"""Topic frames: how the extractive planner expands a topic into investigation points.

A frame recognises the shape of a question ("history of X", "causes of X") and names the
aspects a briefing on it should cover. Each aspect carries cue words, so the writer can
tell which sentence speaks to which point, also for points a human typed in.
"""

import re
from dataclasses import dataclass

from engines.kinds import Kind


@dataclass(frozen=True, slots=True)
class Aspect:
    """One investigation point template and the words that signal it in a sentence."""

    point: str
    query: str
    cues: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Frame:
    """A topic shape: the pattern that finds the subject, and the aspects to cover."""

    name: str
    pattern: re.Pattern[str]
    aspects: tuple[Aspect, ...]


_ORIGINS = (
    "origin",
    "origins",
    "invented",
    "invention",
    "first",
    "early",
    "earliest",
    "began",
    "ancient",
    "developed",
    "introduced",
    "century",
    "created",
    "founded",
)
_SPREAD = (
    "spread",
    "development",
    "developed",
    "expanded",
    "adopted",
    "growth",
    "across",
    "throughout",
    "later",
    "widespread",
    "improved",
    "evolved",
)
_PEOPLE = (
    "inventor",
    "invented",
    "figure",
    "leader",
    "founded",
    "king",
    "emperor",
    "scientist",
    "philosopher",
    "writer",
    "known",
    "led",
    "credited",
    "born",
)
# A point whose cues include these is about people.
PEOPLE_CUES = frozenset({"inventor", "figure", "leader", "scientist"})
_IMPACT = (
    "impact",
    "effect",
    "effects",
    "influence",
    "influenced",
    "led",
    "revolution",
    "transformed",
    "enabled",
    "consequence",
    "significance",
    "important",
    "major",
    "society",
    "role",
)
_LEGACY = (
    "legacy",
    "today",
    "modern",
    "remains",
    "continue",
    "continues",
    "still",
    "considered",
    "regarded",
    "contemporary",
    "influential",
)
_DEFINITION = (
    "is",
    "was",
    "refers",
    "defined",
    "term",
    "known",
    "type",
    "form",
    "consists",
    "describes",
)
_MECHANISM = (
    "works",
    "process",
    "uses",
    "used",
    "using",
    "method",
    "mechanism",
    "consists",
    "produces",
    "function",
    "structure",
)
_POLITICAL = (
    "political",
    "monarchy",
    "king",
    "government",
    "power",
    "estates",
    "assembly",
    "absolute",
    "rights",
    "parliament",
    "state",
    "authority",
    "regime",
)
_ECONOMIC = (
    "economic",
    "economy",
    "financial",
    "debt",
    "tax",
    "taxes",
    "taxation",
    "crisis",
    "bread",
    "prices",
    "trade",
    "poverty",
    "bankrupt",
    "famine",
)
_SOCIAL = (
    "social",
    "society",
    "enlightenment",
    "ideas",
    "philosophy",
    "class",
    "inequality",
    "clergy",
    "nobility",
    "privileges",
    "intellectual",
    "thinkers",
    "liberty",
    "equality",
)
_TRIGGER = (
    "triggered",
    "trigger",
    "sparked",
    "began",
    "storming",
    "outbreak",
    "immediate",
    "1789",
    "event",
    "led",
    "convened",
    "crisis",
)
_CONSEQUENCE = (
    "result",
    "resulted",
    "consequence",
    "led",
    "ended",
    "abolished",
    "established",
    "aftermath",
    "transformed",
    "rise",
    "fall",
    "collapse",
    "influence",
)

_PERSON = (
    Aspect("Early life of {the_s}", "{s} early life born", _ORIGINS + _PEOPLE),
    Aspect("Work and career of {the_s}", "{s} work career", _MECHANISM + _PEOPLE),
    Aspect("Major achievements", "{s} achievements", _IMPACT),
    Aspect("Legacy of {the_s}", "{s} legacy", _LEGACY),
)
_GENERIC = (
    Aspect("Definition and overview", "{s}", _DEFINITION),
    Aspect("History and origins", "{s} history", _ORIGINS),
    Aspect("How it works and key features", "{s} features", _MECHANISM),
    Aspect("Significance and impact", "{s} impact", _IMPACT),
    Aspect("Current state and legacy", "{s} today", _LEGACY),
)

FRAMES: tuple[Frame, ...] = (
    Frame(
        "history",
        re.compile(
            r"^(?:a\s+|the\s+)?(?:brief\s+)?(?:history|story|invention|discovery|development"
            r"|evolution|rise(?:\s+and\s+fall)?|spread|origins?)\s+of\s+(?P<s>.+)$",
            re.IGNORECASE,
        ),
        (
            Aspect("Origins of {the_s}", "{s} origins", _ORIGINS),
            Aspect("Development and spread of {the_s}", "{s} spread development", _SPREAD),
            Aspect("Key figures", "{s} founded led invented", _PEOPLE),
            Aspect("Impact of {the_s} on society", "{s} impact society", _IMPACT),
            Aspect("Legacy of {the_s}", "{s} legacy", _LEGACY),
        ),
    ),
    Frame(
        "causes",
        re.compile(
            r"^(?:(?:the\s+)?(?:main\s+|root\s+)?(?:causes?|reasons?\s+for)\s+(?:of\s+)?"
            r"|what\s+(?:caused|led\s+to)\s+|why\s+did\s+)(?P<s>.+?)(?:\s+happen)?$",
            re.IGNORECASE,
        ),
        (
            Aspect("Background to {the_s}", "{s} background", _ORIGINS + _DEFINITION),
            Aspect("Political causes", "{s} political causes", _POLITICAL),
            Aspect("Economic causes", "{s} economic crisis", _ECONOMIC),
            Aspect("Social and intellectual causes", "{s} social ideas", _SOCIAL),
            Aspect("Immediate triggers", "{s} outbreak", _TRIGGER),
            Aspect("Consequences of {the_s}", "{s} consequences", _CONSEQUENCE),
        ),
    ),
    Frame(
        "effects",
        re.compile(
            r"^(?:the\s+)?(?:effects?|impacts?|consequences?|influence)\s+of\s+(?P<s>.+)$",
            re.IGNORECASE,
        ),
        (
            Aspect("Background to {the_s}", "{s}", _DEFINITION + _ORIGINS),
            Aspect("Immediate effects", "{s} effects", _IMPACT),
            Aspect("Economic effects", "{s} economic", _ECONOMIC),
            Aspect("Social and political effects", "{s} society politics", _SOCIAL + _POLITICAL),
            Aspect("Long-term legacy", "{s} legacy", _LEGACY),
        ),
    ),
    Frame(
        "person",
        re.compile(
            r"^(?:(?:the\s+)?(?:life(?:\s+and\s+(?:work|works|times|legacy))?|biography|career)"
            r"\s+of\s+|who\s+(?:was|is|were)\s+)(?P<s>.+?)\??$",
            re.IGNORECASE,
        ),
        _PERSON,
    ),
    Frame(
        "how",
        re.compile(r"^how\s+(?P<s>.+?)\??$", re.IGNORECASE),
        (
            Aspect("What {the_s} {is_}", "{s}", _DEFINITION),
            Aspect("How {the_s} {works}", "{s} process", _MECHANISM),
            Aspect("History and origins", "{s} history", _ORIGINS),
            Aspect("Significance and impact", "{s} impact", _IMPACT),
        ),
    ),
    Frame(
        "overview",
        re.compile(
            r"^(?:what\s+(?:is|are|was|were)\s+|about\s+|an?\s+overview\s+of\s+)?(?P<s>.+?)\??$",
            re.IGNORECASE,
        ),
        _GENERIC,
    ),
)

# Aspects by the kind of thing the subject is (engines.kinds), for a topic that names
# the subject without a question shape ("the Renaissance", "what is X"), and for the
# history of a state or an organisation, which has rulers and a decline, not inventors.
_EVENTS = (
    "battle",
    "war",
    "campaign",
    "protest",
    "treaty",
    "act",
    "election",
    "invasion",
    "landing",
    "mission",
    "during",
)
_PLACES = ("located", "region", "capital", "border", "territory", "area", "lies", "coast")
_IDEAS = ("theory", "principle", "concept", "idea", "describes", "explains", "based", "law")
_USES = ("used", "applications", "applied", "use", "practice", "technology", "industry")
_THEMES = ("theme", "themes", "story", "tells", "follows", "character", "plot", "depicts")
_RECEPTION = ("acclaimed", "regarded", "considered", "influential", "praised", "criticized")

KIND_ASPECTS: dict[Kind, tuple[Aspect, ...]] = {
    "person": _PERSON,
    "event": (
        Aspect("Background to {the_s}", "{s} background", _ORIGINS + _DEFINITION),
        Aspect("Key events", "{s} events", _EVENTS + _TRIGGER),
        Aspect("Key figures", "{s} leaders", _PEOPLE),
        Aspect("Outcome and legacy", "{s} legacy", _CONSEQUENCE + _LEGACY),
    ),
    "place": (
        Aspect("Overview of {the_s}", "{s}", _DEFINITION + _PLACES),
        Aspect("Origins and rise", "{s} founded", _ORIGINS),
        Aspect("Rulers and key figures", "{s} rulers", _PEOPLE),
        Aspect("Society, economy and culture", "{s} society culture", _SOCIAL + _ECONOMIC),
        Aspect("Decline and legacy", "{s} decline", _CONSEQUENCE + _LEGACY),
    ),
    "organisation": (
        Aspect("Overview of {the_s}", "{s}", _DEFINITION),
        Aspect("History of {the_s}", "{s} history founded", _ORIGINS),
        Aspect("How {the_s} {works}", "{s} operations", _MECHANISM),
        Aspect("Significance and impact", "{s} impact", _IMPACT),
    ),
    "work": (
        Aspect("Overview of {the_s}", "{s}", _DEFINITION),
        Aspect("Story and themes", "{s} themes", _THEMES),
        Aspect("Creation and history", "{s} written", _ORIGINS),
        Aspect("Reception and legacy", "{s} reception", _RECEPTION + _LEGACY),
    ),
    "technology": (
        Aspect("What {the_s} {is_}", "{s}", _DEFINITION),
        Aspect("How {the_s} {works}", "{s} works", _MECHANISM),
        Aspect("History and invention", "{s} invented", _ORIGINS + _PEOPLE),
        Aspect("Uses and impact", "{s} uses", _USES + _IMPACT),
    ),
    "process": (
        Aspect("What {the_s} {is_}", "{s}", _DEFINITION),
        Aspect("How {the_s} {works}", "{s} process", _MECHANISM),
        Aspect("Causes and conditions", "{s} causes", _TRIGGER + _ORIGINS),
        Aspect("Effects and significance", "{s} effects", _IMPACT),
    ),
    "living": (
        Aspect("What {the_s} {is_}", "{s}", _DEFINITION),
        Aspect("Structure and function", "{s} function", _MECHANISM),
        Aspect("Role and significance", "{s} role", _IMPACT),
    ),
    "substance": (
        Aspect("What {the_s} {is_}", "{s}", _DEFINITION),
        Aspect("Properties and composition", "{s} composition", _MECHANISM),
        Aspect("History and origins", "{s} history", _ORIGINS),
        Aspect("Uses and impact", "{s} uses", _USES + _IMPACT),
    ),
    "concept": (
        Aspect("Definition and overview", "{s}", _DEFINITION),
        Aspect("Key ideas", "{s} principles", _IDEAS),
        Aspect("History and key figures", "{s} history", _ORIGINS + _PEOPLE),
        Aspect("Influence and applications", "{s} applications", _USES + _IMPACT),
    ),
}
# The history of a state or organisation: rulers and decline rather than inventors.
_HISTORY_OF_POWER = (
    Aspect("Origins of {the_s}", "{s} origins founded", _ORIGINS),
    Aspect("Rise and expansion", "{s} expansion", _SPREAD),
    Aspect("Rulers and key figures", "{s} rulers", _PEOPLE),
    Aspect("Society, economy and culture", "{s} society culture", _SOCIAL + _ECONOMIC),
    Aspect("Decline and legacy", "{s} decline legacy", _CONSEQUENCE + _LEGACY),
)


# A group of people named after what unites them ("the French Impressionist painters").
_GROUP = (
    Aspect("Origins of the movement", "{s} origins", _ORIGINS),
    Aspect("Leading figures", "{s} leading", _PEOPLE),
    Aspect("Style and methods", "{s} style", _MECHANISM + _IDEAS),
    Aspect("Influence and legacy", "{s} influence", _IMPACT + _LEGACY),
)


def aspects_for(frame: Frame, kind: Kind | None, group: bool = False) -> tuple[Aspect, ...]:
    """The aspects to plan: the question's own, or for its kind when the question has none.

    `group`: the subject is a group of people (`engines.relevance.group_movement`).
    """
    if frame.name == "overview" and group:
        return _GROUP
    if frame.name == "overview" and kind in KIND_ASPECTS:
        return KIND_ASPECTS[kind]
    if frame.name == "history" and kind in ("place", "organisation"):
        return _HISTORY_OF_POWER
    return frame.aspects


def all_aspects() -> tuple[Aspect, ...]:
    """Every aspect any plan may use: to find the cue words of a planned point."""
    found = [a for f in FRAMES for a in f.aspects]
    found += [a for aspects in KIND_ASPECTS.values() for a in aspects]
    return (*found, *_HISTORY_OF_POWER, *_GROUP)


# Words in a human-written point that select a cue list.
POINT_CUES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("events", "battles"), _EVENTS),
    (("style", "methods"), _MECHANISM + _IDEAS),
    (("rulers", "leaders"), _PEOPLE),
    (("decline", "outcome"), _CONSEQUENCE),
    (("ideas", "principles"), _IDEAS),
    (("uses", "applications"), _USES),
    (("themes", "story"), _THEMES),
    (("reception",), _RECEPTION),
    (("origin", "origins", "history", "background", "early", "beginning"), _ORIGINS),
    (("spread", "development", "growth", "evolution"), _SPREAD),
    (("figure", "figures", "people", "inventor", "leaders", "innovations"), _PEOPLE),
    (("impact", "effect", "effects", "significance", "influence"), _IMPACT),
    (("legacy", "today", "current", "future"), _LEGACY),
    (("definition", "overview", "what"), _DEFINITION),
    (("works", "mechanism", "features", "process"), _MECHANISM),
    (("political", "politics"), _POLITICAL),
    (("economic", "economy", "financial"), _ECONOMIC),
    (("social", "intellectual", "ideas", "culture"), _SOCIAL),
    (("trigger", "triggers", "immediate"), _TRIGGER),
    (("consequences", "aftermath", "results"), _CONSEQUENCE),
)


# "the biology of X", "the structure of X": a field or facet of the subject, not the subject.
_FACET_OF = re.compile(
    r"^(?:the\s+)?(?:biology|chemistry|physics|science|economics|politics|psychology|"
    r"geography|structure|role|importance|meaning|nature|basics|principles|theory|"
    r"philosophy|culture|art|music|language|literature|technology)\s+of\s+(?P<s>.+)$",
    re.IGNORECASE,
)
# "X's rise and fall", "DNA's structure": the possessor is the subject.
_POSSESSOR = re.compile(r"^(?P<s>.+?)['’]s?\s+\S.*$")
# "Buddhism in Asia", "the Mongol Empire under Genghis Khan": the subject comes first.
_SETTING = re.compile(r"^(?P<s>.+?)\s+(?:in|under|during|across|throughout)\s+\S.*$", re.IGNORECASE)


_AUXILIARY = {"does", "do", "did", "can", "is", "are", "was", "were", "could", "would"}
_PROCESS_VERBS = {"works", "work", "functions", "happens", "operates", "began", "started"}


def _plural(word: str) -> bool:
    """A plural noun, most likely ("vaccines", not "process", "virus" or "is")."""
    lowered = word.lower()
    return len(lowered) > 3 and lowered.endswith("s") and not lowered.endswith(("ss", "us", "is"))


def _how_subject(rest: str) -> str:
    """The subject of "how ...": "how does X work", "how X works", "how Xs do Y".

    Without an auxiliary, the subject ends before a process verb, or with its first
    plural noun ("how vaccines train ..."), or before the last word ("how airplanes fly").
    """
    words = rest.split()
    if words and words[0].lower() in _AUXILIARY:
        words = words[1:]
        plural = next((i for i, w in enumerate(words[:-1]) if _plural(w)), None)
        return " ".join(words[: plural + 1] if plural is not None else words[:-1] or words)
    for i, word in enumerate(words):
        if word.lower() in _PROCESS_VERBS and i > 0:
            return " ".join(words[:i])
        if (
            i + 1 < len(words)
            and len(word) > 3
            and word.lower().endswith("s")
            and not word.lower().endswith("ss")
        ):
            return " ".join(words[: i + 1])
    return " ".join(words[:-1] or words)


def core_subject(phrase: str) -> str:
    """The subject of a noun phrase, without a facet, possessed part or setting around it."""
    subject = " ".join(phrase.split())
    for pattern in (_FACET_OF, _POSSESSOR, _SETTING):
        match = pattern.match(subject)
        if match and match.group("s").strip():
            subject = match.group("s").strip()
    return re.sub(r"^(?:the|a|an)\s+", "", subject, flags=re.IGNORECASE)


def match_frame(topic: str) -> tuple[Frame, str]:
    """Return the first frame whose pattern matches, and the subject it found."""
    cleaned = " ".join(topic.split()).rstrip(".!?")
    for frame in FRAMES:
        match = frame.pattern.match(cleaned)
        if match:
            found = match.group("s")
            subject = core_subject(_how_subject(found) if frame.name == "how" else found)
            if frame.name == "overview":  # no question shape: a facet may still wrap it
                subject = (
                    core_subject(cleaned)
                    if _FACET_OF.match(cleaned) or _POSSESSOR.match(cleaned)
                    else subject
                )
            return frame, subject or cleaned
    return FRAMES[-1], cleaned


def aspect_point(aspect: Aspect, topic: str, subject: str) -> str:
    """The aspect's investigation point for this subject, as an English heading.

    The subject keeps the article the topic gave it ("How the human heart works") and
    the verb agrees with it ("What volcanoes are").
    """
    the = re.search(rf"\bthe\s+{re.escape(subject)}\b", topic, re.IGNORECASE) is not None
    last = subject.split()[-1] if subject.split() else ""
    plural = _plural(last)
    return aspect.point.format(
        s=subject,
        the_s=f"the {subject}" if the else subject,
        is_="are" if plural else "is",
        works="work" if plural else "works",
    )


def cues_for_point(point: str) -> tuple[str, ...]:
    """Cue words for a point, from the frame aspects whose keywords it mentions."""
    lowered = set(re.findall(r"[a-z]+", point.lower()))
    cues: list[str] = []
    for keys, words in POINT_CUES:
        if lowered & set(keys):
            cues.extend(words)
    return tuple(dict.fromkeys(cues))
