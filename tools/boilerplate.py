"""Lines that are boilerplate wherever they appear, in the languages of the web.

"Read more" links, "Related" blocks, credits, copyright lines, date-only lines, and calls to
action (two cues or an imperative opening, so prose about newsletters stays).
"""

from __future__ import annotations

import re

_READ_MORE = re.compile(
    r"^(?:lea(?: también| más)?|read (?:more|also)|see also|more on this|related|"
    r"lesen sie (?:auch|mehr)|auch (?:lesen|interessant)|mehr (?:zum thema|themen)|weiterlesen|"
    r"vea también|ver también|lee también|lire aussi|à lire aussi|voir aussi|leggi anche|"
    r"zobacz (?:też|także)|czytaj (?:też|także)|leia (?:também|mais))\s*:",
    re.I,
)
_RELATED_HEADING = re.compile(
    r"^(?:related(?: articles| posts| stories| content)?|recommended(?: for you| articles| posts)?|"
    r"you (?:may|might) also like|more (?:stories|articles|from .{1,40})|"
    r"empfohlene (?:beiträge|artikel)|ähnliche (?:beiträge|artikel)|weitere (?:beiträge|artikel)|"
    r"das könnte (?:sie|dich) auch interessieren|auch interessant|mehr zum thema|"
    r"articles? (?:similaires|connexes)|à lire aussi|artículos relacionados|"
    r"noticias relacionadas|te puede interesar|articoli correlati)\s*:?$",
    re.I,
)
_CREDIT = re.compile(
    r"^(?:©|\(c\)|copyright\b|fotos?\s*:|photos?\s*:|bild(?:er)?\s*:|image\s*:|credits?\s*:|"
    r"crédits? photos?\s*:|photo credit)",
    re.I,
)
_TRAILING_CREDIT = re.compile(r"\s+©\s*[^©.!?]{2,60}$")
_RIGHTS = re.compile(
    r"all rights reserved|alle rechte vorbehalten|tous droits réservés|todos los derechos reservados",
    re.I,
)
_DATE_ONLY = re.compile(r"^(?:\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d{4}-\d{2}-\d{2})$")
# calls to action, matched from the start of a line; each needs two cues (or an imperative
# opening), so that prose about newsletters, apps or channels stays
_CALLS = (
    re.compile(
        r"^(?:subscribe|sign up|abonnieren sie|jetzt abonnieren|abonnez-vous|suscr[ií]bete|"
        r"inscrivez-vous|follow us|folgen sie uns|síguenos|suivez-nous)\b",
        re.I,
    ),
    re.compile(
        r"(?=.*\bnewsletter)(?=.*\b(?:sign(?:ing)? up|subscribe|abonnieren|anmelden|bestellen|"
        r"erhalten|abonnez|inscri\w*|suscr[ií]b\w*|receive|join|get)\b)",
        re.I,
    ),
    re.compile(
        r"(?=.*\b(?:never|don't) miss\b)(?=.*\b(?:sign up|subscribe|newsletter|e-?mail)\b)", re.I
    ),
    re.compile(
        r"^\W*(?:follow|folgen sie|síguenos|suivez|seguici)\b.{0,80}\b(?:twitter|facebook|"
        r"instagram|linkedin|youtube|telegram|whatsapp|tiktok)\b",
        re.I,
    ),
    re.compile(
        r".*?\bdownload\b.{0,80}\bapps?\b.{0,40}\b(?:ios|android|app store|google play)\b", re.I
    ),
    re.compile(
        r"(?=.*\b(?:canal|channel|kanal)\b.{0,40}\b(?:telegram|youtube|whatsapp)\b)"
        r"(?=.*\b(?:our|nuestro|nuestra|tenemos|unser\w*|notre|nostro)\b)",
        re.I,
    ),
)


def _is_boilerplate(line: str) -> bool:
    size = len(line)
    return bool(
        (size < 250 and _READ_MORE.match(line))
        or (size < 100 and _CREDIT.match(line))
        or (size < 200 and _RIGHTS.search(line))
        or _DATE_ONLY.match(line)
        or (size < 250 and any(call.match(line) for call in _CALLS))
    )


def drop_boilerplate(text: str) -> str:
    """Drop boilerplate lines; a "Related" heading takes the short link lines under it along."""
    kept: list[str] = []
    in_related = False
    for line in text.splitlines():
        bare = line.strip().lstrip("-•* ").strip()
        if in_related:
            if bare and len(bare) < 100 and not bare.endswith((".", "!", "?", ":")):
                continue
            in_related = False
        if len(bare) < 60 and _RELATED_HEADING.match(bare):
            in_related = True
            continue
        if _is_boilerplate(bare):
            continue
        kept.append(_TRAILING_CREDIT.sub("", line))
    return "\n".join(kept)
