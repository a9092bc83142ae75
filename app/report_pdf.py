"""The report as a PDF: its HTML document printed by WeasyPrint.

WeasyPrint is the `pdf` extra (`pip install 'research-agent[pdf]'`), and it draws text
with Pango, a system library: where either is missing, importing it fails, and the
report's other formats are still served (the route answers 406 saying what to install). CJK text needs a font that covers it
(`fonts-wqy-microhei`, or any Noto CJK font); DejaVu covers Latin, Greek, Cyrillic and
Arabic.
"""

from typing import Any

from app.report_html import report_document

INSTALL = (
    "the PDF renderer (WeasyPrint) cannot run here: install the PDF extra "
    "(`pip install 'research-agent[pdf]'`) and Pango "
    "(`apt-get install libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0` on Debian/Ubuntu; "
    "fonts-dejavu-core and fonts-wqy-microhei for Latin, Arabic and CJK text), or ask for "
    "another format"
)


class RendererMissing(Exception):
    """A format's renderer cannot run on this machine; the message says what to install."""


def _refuse_fetch(url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Fetch nothing: the document holds all it shows, and a report's URLs are only links."""
    raise ValueError(f"not fetched: {url[:100]}")


def report_pdf(markdown: str) -> bytes:
    """Return the report's HTML document (`report_document`) printed as PDF bytes."""
    try:
        from weasyprint import HTML
    except (ImportError, OSError) as exc:  # OSError: a library Pango needs was not found
        raise RendererMissing(f"{INSTALL} ({str(exc)[:200]})") from None
    document = HTML(string=report_document(markdown), url_fetcher=_refuse_fetch)
    pdf: bytes = document.write_pdf()
    return pdf
