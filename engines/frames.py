"""Topic frames: how the extractive planner expands a topic into investigation points.

A frame recognises the shape of a question ("history of X", "causes of X") and names the
aspects a briefing on it should cover. Each aspect carries cue words, so the writer can
tell which sentence speaks to which point, also for points a human typed in.
"""

import re
from dataclasses import dataclass


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
        re.compile(r"^(?:a\s+|the\s+)?(?:brief\s+)?history\s+of\s+(?P<s>.+)$", re.IGNORECASE),
        (
            Aspect("Origins of {s}", "{s} origins invention", _ORIGINS),
            Aspect("Development and spread of {s}", "{s} spread development", _SPREAD),
            Aspect("Key figures and innovations", "{s} inventor", _PEOPLE),
            Aspect("Impact of {s} on society", "{s} impact society", _IMPACT),
            Aspect("Legacy of {s}", "{s} legacy", _LEGACY),
        ),
    ),
    Frame(
        "causes",
        re.compile(
            r"^(?:the\s+)?(?:main\s+|root\s+)?(?:causes?|origins?|reasons?\s+for)\s+(?:of\s+)?(?P<s>.+)$",
            re.IGNORECASE,
        ),
        (
            Aspect("Background to {s}", "{s} background", _ORIGINS + _DEFINITION),
            Aspect("Political causes", "{s} political causes", _POLITICAL),
            Aspect("Economic causes", "{s} economic crisis", _ECONOMIC),
            Aspect("Social and intellectual causes", "{s} social ideas", _SOCIAL),
            Aspect("Immediate triggers", "{s} outbreak", _TRIGGER),
            Aspect("Consequences of {s}", "{s} consequences", _CONSEQUENCE),
        ),
    ),
    Frame(
        "effects",
        re.compile(
            r"^(?:the\s+)?(?:effects?|impacts?|consequences?|influence)\s+of\s+(?P<s>.+)$",
            re.IGNORECASE,
        ),
        (
            Aspect("Background to {s}", "{s}", _DEFINITION + _ORIGINS),
            Aspect("Immediate effects", "{s} effects", _IMPACT),
            Aspect("Economic effects", "{s} economic", _ECONOMIC),
            Aspect("Social and political effects", "{s} society politics", _SOCIAL + _POLITICAL),
            Aspect("Long-term legacy", "{s} legacy", _LEGACY),
        ),
    ),
    Frame(
        "how",
        re.compile(
            r"^how\s+(?:does|do|did)\s+(?P<s>.+?)\s+(?:work|function|happen)\??$", re.IGNORECASE
        ),
        (
            Aspect("What {s} is", "{s}", _DEFINITION),
            Aspect("How {s} works", "{s} process", _MECHANISM),
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

# Words in a human-written point that select a cue list.
POINT_CUES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
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


def match_frame(topic: str) -> tuple[Frame, str]:
    """Return the first frame whose pattern matches, and the subject it found."""
    cleaned = " ".join(topic.split()).rstrip(".!?")
    for frame in FRAMES:
        match = frame.pattern.match(cleaned)
        if match:
            subject = re.sub(r"^(?:the|a|an)\s+", "", match.group("s").strip(), flags=re.IGNORECASE)
            return frame, subject or cleaned
    return FRAMES[-1], cleaned


def cues_for_point(point: str) -> tuple[str, ...]:
    """Cue words for a point, from the frame aspects whose keywords it mentions."""
    lowered = set(re.findall(r"[a-z]+", point.lower()))
    cues: list[str] = []
    for keys, words in POINT_CUES:
        if lowered & set(keys):
            cues.extend(words)
    return tuple(dict.fromkeys(cues))
