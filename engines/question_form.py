"""What a question's form asks a report to say: causes, effects, or both sides of a case.

The form adds sections of the sentences that say so ("why" asks for causes); it never
changes what is searched or which sources count.
"""

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Answer:
    """Name a section a question's form asks for: its heading, and how its sentences read."""

    heading: str
    says: re.Pattern[str]


CAUSES = Answer(
    "Causes and contributing factors",
    re.compile(
        r"\b(?:because|due\s+to|owing\s+to|caus(?:e|es|ed|ing)|contribut\w*|factors?|reasons?"
        r"|led\s+to|leading\s+to|lead\s+to|result(?:ed|s)?\s+(?:of|from)|trigger\w*|spark\w*"
        r"|prompt(?:ed|ing)|brought\s+about|stemm\w*\s+from|driven\s+by|precipitat\w*"
        r"|weaken\w*|undermin\w*"
        # A purpose answers "why did they do it": "with the aim of forcing ...".
        r"|in\s+order\s+to|so\s+as\s+to|with\s+the\s+(?:aim|goal|intention|purpose|objective)\s+of"
        r"|aim(?:ed|ing)\s+(?:at|to)|intended\s+to|in\s+an?\s+(?:attempt|effort|bid)\s+to"
        r"|sought\s+to|motivated\s+by)\b",
        re.IGNORECASE,
    ),
)
EFFECTS = Answer(
    "Effects and consequences",
    re.compile(
        r"\b(?:led\s+to|leading\s+to|result(?:ed|s|ing)?\s+in|as\s+a\s+result|consequen\w*"
        r"|caus(?:e|es|ing)|caused(?!\s+by)|effects?|impacts?|influen\w*|transform\w*"
        r"|chang(?:e|ed|es|ing)"
        r"|brought|legacy|aftermath|reshap\w*|gave\s+rise|paved\s+the\s+way)\b",
        re.IGNORECASE,
    ),
)
ADVANTAGES = Answer(
    "Advantages",
    re.compile(
        r"\b(?:advantage(?:s|ous)?|benefi\w*|efficien\w*|cheap\w*|inexpensive|low[\s-]cost"
        r"|reliab\w*|safe(?:r|st|ly)?|clean(?:er|est)?|abundant|valuable|improv\w*)\b",
        re.IGNORECASE,
    ),
)
DRAWBACKS = Answer(
    "Drawbacks and risks",
    re.compile(
        r"\b(?:disadvantage\w*|drawbacks?|risk\w*|danger\w*|hazard\w*|concerns?|problem\w*"
        r"|costly|expensive|pollut\w*|waste\w*|accidents?|disasters?|criticis\w*|critics?"
        r"|controvers\w*|harm\w*|limitations?|threat\w*|toxic\w*|damag\w*"
        r"|opposition|opposed|difficult\w*|unsafe)\b",
        re.IGNORECASE,
    ),
)

# How a question asks for each answer: a form word where it governs the subject ("the
# effects of X", "what caused X"), not inside a name ("the placebo effect").
_ASKS: tuple[tuple[re.Pattern[str], tuple[Answer, ...]], ...] = (
    (
        re.compile(
            r"\bwhy\b|\b(?:causes?|reasons?)\s+(?:of|for|behind)\b"
            r"|\bwhat\s+(?:caused|causes|led\s+to)\b",
            re.IGNORECASE,
        ),
        (CAUSES,),
    ),
    (
        re.compile(
            r"\b(?:effects?|impacts?|consequences?|influence|legacy)\s+(?:of|on)\b"
            r"|\b(?:what|how)\s+did\b.*\b(?:change|affect)\b",
            re.IGNORECASE,
        ),
        (EFFECTS,),
    ),
    (
        re.compile(
            r"\b(?:pros|cons|disadvantages|drawbacks)\b|\badvantages\s+and\b"
            r"|\bgood\s+and\s+bad\b|\bbenefits\s+and\s+(?:risks|costs|drawbacks)\b",
            re.IGNORECASE,
        ),
        (ADVANTAGES, DRAWBACKS),
    ),
    (re.compile(r"\b(?:advantages|benefits)\s+of\b", re.IGNORECASE), (ADVANTAGES,)),
    (re.compile(r"\b(?:risks|dangers)\s+of\b", re.IGNORECASE), (DRAWBACKS,)),
)


def answers_asked(topic: str) -> list[Answer]:
    """Return the sections the topic's form asks for, in the order it asks; none for most."""
    found = sorted(
        (match.start(), answers) for pattern, answers in _ASKS if (match := pattern.search(topic))
    )
    return list(dict.fromkeys(answer for _, answers in found for answer in answers))


def says(answer: Answer, sentence: str) -> int:
    """Count the sentence's words that say what the answer asks for."""
    return len(answer.says.findall(sentence))
