"""Cue words: the words that signal, in a sentence, that it speaks to an aspect of a topic.

The frames (`engines.frames`) give each planned aspect its cue list; a point a human
typed in gets the lists its own keywords select (`cues_for_point`).
"""

import re

ORIGINS = (
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
SPREAD = (
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
PEOPLE = (
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
IMPACT = (
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
LEGACY = (
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
DEFINITION = (
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
MECHANISM = (
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
POLITICAL = (
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
ECONOMIC = (
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
SOCIAL = (
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
TRIGGER = (
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
CONSEQUENCE = (
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
EVENTS = (
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
PLACES = ("located", "region", "capital", "border", "territory", "area", "lies", "coast")
IDEAS = ("theory", "principle", "concept", "idea", "describes", "explains", "based", "law")
USES = ("used", "applications", "applied", "use", "practice", "technology", "industry")
THEMES = ("theme", "themes", "story", "tells", "follows", "character", "plot", "depicts")
RECEPTION = ("acclaimed", "regarded", "considered", "influential", "praised", "criticized")

# Words in a human-written point that select a cue list.
POINT_CUES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("events", "battles"), EVENTS),
    (("style", "methods"), MECHANISM + IDEAS),
    (("rulers", "leaders"), PEOPLE),
    (("decline", "outcome"), CONSEQUENCE),
    (("ideas", "principles"), IDEAS),
    (("uses", "applications"), USES),
    (("themes", "story"), THEMES),
    (("reception",), RECEPTION),
    (("origin", "origins", "history", "background", "early", "beginning"), ORIGINS),
    (("spread", "development", "growth", "evolution"), SPREAD),
    (("figure", "figures", "people", "inventor", "leaders", "innovations"), PEOPLE),
    (("impact", "effect", "effects", "significance", "influence"), IMPACT),
    (("legacy", "today", "current", "future"), LEGACY),
    (("definition", "overview", "what"), DEFINITION),
    (("works", "mechanism", "features", "process"), MECHANISM),
    (("political", "politics"), POLITICAL),
    (("economic", "economy", "financial"), ECONOMIC),
    (("social", "intellectual", "ideas", "culture"), SOCIAL),
    (("trigger", "triggers", "immediate"), TRIGGER),
    (("consequences", "aftermath", "results"), CONSEQUENCE),
)


def cues_for_point(point: str) -> tuple[str, ...]:
    """Cue words for a point, from the frame aspects whose keywords it mentions."""
    lowered = set(re.findall(r"[a-z]+", point.lower()))
    cues: list[str] = []
    for keys, words in POINT_CUES:
        if lowered & set(keys):
            cues.extend(words)
    return tuple(dict.fromkeys(cues))
