"""URL normalisation, so one page found twice counts once."""

from functools import lru_cache
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

# Parameters that identify a campaign or a click, never the page itself.
_TRACKING_PREFIXES = ("utm_", "mc_", "pk_", "hsa_")
_TRACKING_NAMES = frozenset(
    {"fbclid", "gclid", "dclid", "msclkid", "yclid", "igshid", "ref_src", "_hsenc", "_hsmi"}
)


def _is_tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered in _TRACKING_NAMES or lowered.startswith(_TRACKING_PREFIXES)


_PATH_SAFE = "/:@!$&'()*+,;=-._~"


# Cached: a run normalises the same few dozen URLs again at every step.
@lru_cache(maxsize=8192)
def normalize_url(url: str) -> str:
    """Return the key under which two spellings of one URL compare equal.

    Scheme and host lower-cased; default ports, fragment, tracking parameters and a
    trailing slash dropped; the path's percent-encoding made canonical. A local file's
    fragment is kept: it names a part of the file (a PDF's `#page=12`, a line), and two
    pages of one PDF are two sources.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and not (
        (scheme == "http" and port == 80) or (scheme == "https" and port == 443)
    ):
        host = f"{host}:{port}"
    # One spelling of the path: "Lift_(force)" and "Lift_%28force%29" are one page.
    path = quote(unquote(parts.path), safe=_PATH_SAFE).rstrip("/")
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k)]
    )
    fragment = parts.fragment if scheme == "file" else ""
    return urlunsplit((scheme, host, path, query, fragment))


def markdown_url(url: str) -> str:
    """Return `url` safe inside a Markdown link: parentheses and spaces percent-encoded."""
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
