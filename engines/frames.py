"""Topic frames: how the extractive planner expands a topic into investigation points.

A frame recognises the shape of a question ("history of X", "causes of X") and names the
aspects a briefing on it should cover. Each aspect carries cue words, so the writer can
tell which sentence speaks to which point, also for points a human typed in.
"""

import re
from dataclasses import dataclass

from engines.frame_cues import (
    CONSEQUENCE,
    DEFINITION,
    ECONOMIC,
    EVENTS,
    IDEAS,
    IMPACT,
    LEGACY,
    MECHANISM,
    ORIGINS,
    PEOPLE,
    PLACES,
    POLITICAL,
    RECEPTION,
    SOCIAL,
    SPREAD,
    THEMES,
    TRIGGER,
    USES,
)
from engines.kinds import Kind
from engines.subjects import core_subject, how_subject, is_wrapped, plural


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


# Aspects that several shapes and kinds of topic share.
_WHAT_IT_IS = Aspect("What {the_s} {is_}", "{s}", DEFINITION)
_HISTORY_AND_ORIGINS = Aspect("History and origins", "{s} history", ORIGINS)
_SIGNIFICANCE = Aspect("Significance and impact", "{s} impact", IMPACT)

_PERSON = (
    Aspect("Early life of {the_s}", "{s} early life born", ORIGINS + PEOPLE),
    Aspect("Work and career of {the_s}", "{s} work career", MECHANISM + PEOPLE),
    Aspect("Major achievements", "{s} achievements", IMPACT),
    Aspect("Legacy of {the_s}", "{s} legacy", LEGACY),
)
_GENERIC = (
    Aspect("Definition and overview", "{s}", DEFINITION),
    _HISTORY_AND_ORIGINS,
    Aspect("How it works and key features", "{s} features", MECHANISM),
    _SIGNIFICANCE,
    Aspect("Current state and legacy", "{s} today", LEGACY),
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
            Aspect("Origins of {the_s}", "{s} origins", ORIGINS),
            Aspect("Development and spread of {the_s}", "{s} spread development", SPREAD),
            Aspect("Key figures", "{s} founded led invented", PEOPLE),
            Aspect("Impact of {the_s} on society", "{s} impact society", IMPACT),
            Aspect("Legacy of {the_s}", "{s} legacy", LEGACY),
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
            Aspect("Background to {the_s}", "{s} background", ORIGINS + DEFINITION),
            Aspect("Political causes", "{s} political causes", POLITICAL),
            Aspect("Economic causes", "{s} economic crisis", ECONOMIC),
            Aspect("Social and intellectual causes", "{s} social ideas", SOCIAL),
            Aspect("Immediate triggers", "{s} outbreak", TRIGGER),
            Aspect("Consequences of {the_s}", "{s} consequences", CONSEQUENCE),
        ),
    ),
    Frame(
        "effects",
        re.compile(
            r"^(?:the\s+)?(?:effects?|impacts?|consequences?|influence)\s+of\s+(?P<s>.+)$",
            re.IGNORECASE,
        ),
        (
            Aspect("Background to {the_s}", "{s}", DEFINITION + ORIGINS),
            Aspect("Immediate effects", "{s} effects", IMPACT),
            Aspect("Economic effects", "{s} economic", ECONOMIC),
            Aspect("Social and political effects", "{s} society politics", SOCIAL + POLITICAL),
            Aspect("Long-term legacy", "{s} legacy", LEGACY),
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
            _WHAT_IT_IS,
            Aspect("How {the_s} {works}", "{s} process", MECHANISM),
            _HISTORY_AND_ORIGINS,
            _SIGNIFICANCE,
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
KIND_ASPECTS: dict[Kind, tuple[Aspect, ...]] = {
    "person": _PERSON,
    "event": (
        Aspect("Background to {the_s}", "{s} background", ORIGINS + DEFINITION),
        Aspect("Key events", "{s} events", EVENTS + TRIGGER),
        Aspect("Key figures", "{s} leaders", PEOPLE),
        Aspect("Outcome and legacy", "{s} legacy", CONSEQUENCE + LEGACY),
    ),
    "place": (
        Aspect("Overview of {the_s}", "{s}", DEFINITION + PLACES),
        Aspect("Origins and rise", "{s} founded", ORIGINS),
        Aspect("Rulers and key figures", "{s} rulers", PEOPLE),
        Aspect("Society, economy and culture", "{s} society culture", SOCIAL + ECONOMIC),
        Aspect("Decline and legacy", "{s} decline", CONSEQUENCE + LEGACY),
    ),
    "organisation": (
        Aspect("Overview of {the_s}", "{s}", DEFINITION),
        Aspect("History of {the_s}", "{s} history founded", ORIGINS),
        Aspect("How {the_s} {works}", "{s} operations", MECHANISM),
        _SIGNIFICANCE,
    ),
    "work": (
        Aspect("Overview of {the_s}", "{s}", DEFINITION),
        Aspect("Story and themes", "{s} themes", THEMES),
        Aspect("Creation and history", "{s} written", ORIGINS),
        Aspect("Reception and legacy", "{s} reception", RECEPTION + LEGACY),
    ),
    "technology": (
        _WHAT_IT_IS,
        Aspect("How {the_s} {works}", "{s} works", MECHANISM),
        Aspect("History and invention", "{s} invented", ORIGINS + PEOPLE),
        Aspect("Uses and impact", "{s} uses", USES + IMPACT),
    ),
    "process": (
        _WHAT_IT_IS,
        Aspect("How {the_s} {works}", "{s} process", MECHANISM),
        Aspect("Causes and conditions", "{s} causes", TRIGGER + ORIGINS),
        Aspect("Effects and significance", "{s} effects", IMPACT),
    ),
    "living": (
        _WHAT_IT_IS,
        Aspect("Structure and function", "{s} function", MECHANISM),
        Aspect("Role and significance", "{s} role", IMPACT),
    ),
    "substance": (
        _WHAT_IT_IS,
        Aspect("Properties and composition", "{s} composition", MECHANISM),
        _HISTORY_AND_ORIGINS,
        Aspect("Uses and impact", "{s} uses", USES + IMPACT),
    ),
    "concept": (
        Aspect("Definition and overview", "{s}", DEFINITION),
        Aspect("Key ideas", "{s} principles", IDEAS),
        Aspect("History and key figures", "{s} history", ORIGINS + PEOPLE),
        Aspect("Influence and applications", "{s} applications", USES + IMPACT),
    ),
}
# The history of a state or organisation: rulers and decline rather than inventors.
_HISTORY_OF_POWER = (
    Aspect("Origins of {the_s}", "{s} origins founded", ORIGINS),
    Aspect("Rise and expansion", "{s} expansion", SPREAD),
    Aspect("Rulers and key figures", "{s} rulers", PEOPLE),
    Aspect("Society, economy and culture", "{s} society culture", SOCIAL + ECONOMIC),
    Aspect("Decline and legacy", "{s} decline legacy", CONSEQUENCE + LEGACY),
)


# A group of people named after what unites them ("the French Impressionist painters").
_GROUP = (
    Aspect("Origins of the movement", "{s} origins", ORIGINS),
    Aspect("Leading figures", "{s} leading", PEOPLE),
    Aspect("Style and methods", "{s} style", MECHANISM + IDEAS),
    Aspect("Influence and legacy", "{s} influence", IMPACT + LEGACY),
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


def match_frame(topic: str) -> tuple[Frame, str]:
    """Return the first frame whose pattern matches, and the subject it found."""
    cleaned = " ".join(topic.split()).rstrip(".!?")
    for frame in FRAMES:
        match = frame.pattern.match(cleaned)
        if match:
            found = match.group("s")
            subject = core_subject(how_subject(found) if frame.name == "how" else found)
            if frame.name == "overview":  # no question shape: a facet may still wrap it
                subject = core_subject(cleaned) if is_wrapped(cleaned) else subject
            return frame, subject or cleaned
    return FRAMES[-1], cleaned


def aspect_point(aspect: Aspect, topic: str, subject: str) -> str:
    """The aspect's investigation point for this subject, as an English heading.

    The subject keeps the article the topic gave it ("How the human heart works") and
    the verb agrees with it ("What volcanoes are").
    """
    the = re.search(rf"\bthe\s+{re.escape(subject)}\b", topic, re.IGNORECASE) is not None
    last = subject.split()[-1] if subject.split() else ""
    plural_subject = plural(last)
    return aspect.point.format(
        s=subject,
        the_s=f"the {subject}" if the else subject,
        is_="are" if plural_subject else "is",
        works="work" if plural_subject else "works",
    )
