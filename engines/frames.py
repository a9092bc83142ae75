"""The subject of a topic: the phrase a question is about, whatever its shape.

A frame recognises a question's shape ("history of X", "causes of X", "who was X", "how
X works") only to take the subject out of it; what is searched and written never depends
on the shape (the topic's own words lead every plan, `nodes.supervisor.led_by_topic`, and
sections follow the evidence, `engines.extractive`).
"""

import re
from dataclasses import dataclass

from engines.subjects import core_subject, how_subject, is_wrapped


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
            r"^(?:(?:the\s+)?(?:main\s+|root\s+)?(?:causes?|reasons?\s+for)\s+(?:of\s+)?"
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
            r"^(?:(?:the\s+)?(?:life(?:\s+and\s+(?:work|works|times|legacy))?|biography|career)"
            r"\s+of\s+|who\s+(?:was|is|were)\s+)(?P<s>.+?)\??$",
            re.IGNORECASE,
        ),
    ),
    Frame(
        "how",
        re.compile(r"^how\s+(?P<s>.+?)\??$", re.IGNORECASE),
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
    # "who painted X", "what happened at X", "what made X a power": X, up to a second part.
    Frame(
        "what",
        re.compile(
            r"^(?:what|who|which)\s+(?!(?:is|are|was|were|do|does|did|can|could|will|would"
            r"|should|has|have|had)\b)\w+\s+(?:(?:at|in|on|to|of|about|with)\s+)?"
            r"(?P<s>.+?)(?:,|\s+and\s|\s+an?\s|\?|$)",
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


# Where a question's second part begins: "what causes X and where do they happen".
_SECOND_PART = re.compile(r"\b(?:what|who|where|when|why|how|which)\b", re.IGNORECASE)


def match_frame(topic: str) -> tuple[Frame, str]:
    """Return the first frame whose pattern matches, and the subject it found."""
    cleaned = " ".join(topic.split()).rstrip(".!?")
    for frame in FRAMES:
        match = frame.pattern.match(cleaned)
        if match:
            found = match.group("s")
            if frame is not FRAMES[-1] and _SECOND_PART.search(found):
                continue  # a question in two parts is about both: no frame takes one
            subject = core_subject(how_subject(found) if frame.name in ("how", "why") else found)
            if frame.name == "overview":  # no question shape: a facet may still wrap it
                subject = core_subject(cleaned) if is_wrapped(cleaned) else subject
            return frame, subject or cleaned
    return FRAMES[-1], cleaned
