"""URL normalisation, so one page found twice counts once."""

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# Parameters that identify a campaign or a click, never the page itself.
_TRACKING_PREFIXES = ("utm_", "mc_", "pk_", "hsa_")
_TRACKING_NAMES = frozenset(
    {"fbclid", "gclid", "dclid", "msclkid", "yclid", "igshid", "ref_src", "_hsenc", "_hsmi"}
)


def _is_tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered in _TRACKING_NAMES or lowered.startswith(_TRACKING_PREFIXES)


def normalize_url(url: str) -> str:
    """Return the key under which two spellings of one URL compare equal.

    Scheme and host are lower-cased, default ports, the fragment and tracking
    parameters are dropped, and a trailing slash on the path is removed.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and not (
        (scheme == "http" and port == 80) or (scheme == "https" and port == 443)
    ):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k)]
    )
    return urlunsplit((scheme, host, path, query, ""))
