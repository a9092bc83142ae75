"""The subject of a topic: what a question is about, without the words wrapped around it.

"How does the human heart work" is about the human heart; "the biology of cats" and
"DNA's structure" are about cats and DNA; "Buddhism in Asia" is about Buddhism.
"""

import re

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
_SETTING = re.compile(
    r"^(?P<s>.+?)\s+(?:in|on|under|during|across|throughout)\s+\S.*$", re.IGNORECASE
)


_AUXILIARY = {"does", "do", "did", "can", "is", "are", "was", "were", "could", "would"}
_PRONOUNS = {"we", "you", "they", "i", "people", "humans"}
_PLACING = {"in", "on", "at", "during", "after", "before", "under"}
_PROCESS_VERBS = {"works", "work", "functions", "happens", "operates", "began", "started"}


def plural(word: str) -> bool:
    """A plural noun, most likely ("vaccines", not "process", "virus" or "is")."""
    lowered = word.lower()
    return len(lowered) > 3 and lowered.endswith("s") and not lowered.endswith(("ss", "us", "is"))


def how_subject(rest: str) -> str:
    """The subject of "how ..." or "why ...": "how does X work", "how X works", "why did X fall".

    After an auxiliary, the subject ends with its first plural noun, or before the last of
    three words ("why did the Qing dynasty fall"); a longer phrase stays whole. Without an
    auxiliary, it ends before a process verb, or with its first plural noun ("how vaccines
    train ..."), or before the last word ("how airplanes fly").
    """
    words = rest.split()
    if words and words[0].lower() in _AUXILIARY:
        words = words[1:]
        if words and words[0].lower() in _PRONOUNS:
            return " ".join(words[1:]) or rest  # "why do we dream": dreaming
        place = next((i for i, w in enumerate(words) if i > 1 and w.lower() in _PLACING), None)
        words = words[:place]  # "why did Constantinople fall in 1453"
        first = next((i for i, w in enumerate(words[:-1]) if plural(w)), None)
        if first is not None:
            return " ".join(words[: first + 1])
        # Where the verb is is not known past a few words: "did the steam engine change ...".
        named = [w for w in words if w.lower() not in ("the", "a", "an")]
        return " ".join(words if len(named) > 3 else words[:-1] or words)
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


def is_wrapped(phrase: str) -> bool:
    """Whether a facet ("the biology of") or a possessor ("X's") wraps the subject."""
    return bool(_FACET_OF.match(phrase) or _POSSESSOR.match(phrase))
