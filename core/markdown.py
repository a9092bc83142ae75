"""Text from outside (a source's sentence, a title, a topic) written into Markdown as text, never markup."""

import re

# What starts an inline construct (CommonMark: any ASCII punctuation may be escaped).
_INLINE = re.compile(r"([\\`*_\[\]<>!&|~])")
# What starts a block at the beginning of a line: a heading, quote, list item, rule, table.
_BLOCK_START = re.compile(r"^(\s*)([#>+\-=|]|\d+(?=[.)]))")


def markdown_text(text: str) -> str:
    """Return `text` as one line of Markdown that renders as exactly this text."""
    line = " ".join(text.split())
    escaped = _INLINE.sub(r"\\\1", line)
    return _BLOCK_START.sub(_escape_block_start, escaped, count=1)


def _escape_block_start(match: re.Match[str]) -> str:
    space, mark = match.groups()
    if mark.isdigit():  # "1. ..." would start an ordered list: escape its dot or bracket
        return f"{space}{mark}\\"
    return f"{space}\\{mark}"


# A backslash escape of ASCII punctuation (CommonMark), as `markdown_text` writes them.
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def plain_text(markdown: str) -> str:
    """Return `markdown` with its backslash escapes undone: the text a reader sees."""
    return _ESCAPED.sub(r"\1", markdown)
