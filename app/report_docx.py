"""The report as a Word file (python-docx), from the same parse as its HTML.

Headings keep their levels (the report's title is the document's Title), paragraphs and
lists their bold, italic and code; a citation stays the `[n]` mark it is in HTML, and
each reference is a paragraph `[n] title` whose title links to the source's URL, shown
after it (a printed copy keeps it).
"""

import io
from typing import Any

from docx import Document
from docx.document import Document as DocumentObject
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.text.paragraph import Paragraph
from markdown_it.token import Token

from app.report_html import parsed_report

_LINK_COLOUR = "0563C1"


def report_docx(markdown: str) -> bytes:
    """Return the report as the bytes of a .docx file."""
    report = parsed_report(markdown)
    document = Document()
    document.core_properties.title = report.title
    document.core_properties.subject = "Research report"
    _Writer(document, rtl=report.direction == "rtl").write(report.tokens, report.summary)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


class _Writer:
    """Walks markdown-it's block tokens, adding a paragraph for each block of text."""

    def __init__(self, document: DocumentObject, rtl: bool) -> None:
        self.document = document
        self.rtl = rtl
        self.lists: list[str] = []  # "bullet" or "ordered", innermost last
        self.quoted = 0
        self.footnote: int | None = None  # the reference being written (its number)
        self.table: list[list[list[Token]]] | None = None

    def write(self, tokens: list[Token], summary: str) -> None:
        """Add the report's blocks to the document; the summary line after its title."""
        title_done = False
        pending_style: str | None = None
        for at, token in enumerate(tokens):
            kind = token.type
            if kind == "heading_open":
                pending_style = f"h{token.tag[1:]}"
            elif kind in ("bullet_list_open", "ordered_list_open"):
                self.lists.append("bullet" if kind.startswith("bullet") else "ordered")
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
            elif kind == "blockquote_open":
                self.quoted += 1
            elif kind == "blockquote_close":
                self.quoted -= 1
            elif kind == "footnote_open":
                self.footnote = int(token.meta["id"]) + 1
            elif kind == "footnote_close":
                self.footnote = None
            elif kind == "table_open":
                self.table = []
            elif kind == "tr_open" and self.table is not None:
                self.table.append([])
            elif kind == "inline" and self.table is not None:
                self.table[-1].append(token.children or [])
            elif kind == "table_close" and self.table is not None:
                self._table(self.table)
                self.table = None
            elif kind in ("fence", "code_block"):
                paragraph = self._paragraph(None)
                run = paragraph.add_run(token.content.rstrip("\n"))
                run.font.name = "Courier New"
            elif kind == "inline":
                if pending_style is not None:
                    level = int(pending_style[1:])
                    paragraph = self.document.add_heading("", 0 if level == 1 else level - 1)
                    self._direction(paragraph)
                    self._runs(paragraph, token.children or [])
                    pending_style = None
                    if level == 1 and not title_done and summary:
                        line = self._paragraph(None)
                        run = line.add_run(summary)
                        run.italic = True
                        run.font.color.rgb = RGBColor(0x55, 0x55, 0x55)
                    title_done = title_done or level == 1
                    continue
                paragraph = self._paragraph(self._style())
                if self.footnote is not None and tokens[at - 1].type == "paragraph_open":
                    before = tokens[at - 2] if at >= 2 else None
                    if before is not None and before.type == "footnote_open":
                        paragraph.add_run(f"[{self.footnote}] ")
                self._runs(paragraph, token.children or [])

    def _style(self) -> str | None:
        if self.lists:
            base = "List Bullet" if self.lists[-1] == "bullet" else "List Number"
            depth = min(len(self.lists), 3)
            return base if depth == 1 else f"{base} {depth}"
        return "Quote" if self.quoted else None

    def _paragraph(self, style: str | None) -> Paragraph:
        paragraph = self.document.add_paragraph(style=style)
        self._direction(paragraph)
        return paragraph

    def _direction(self, paragraph: Paragraph) -> None:
        """Mark the paragraph right-to-left when the report's title is (Word's `w:bidi`)."""
        if self.rtl:
            paragraph._p.get_or_add_pPr().append(OxmlElement("w:bidi"))

    def _runs(self, paragraph: Paragraph, children: list[Token]) -> None:
        """Add the inline tokens as runs: marks, links (only the references have any) as hyperlinks."""
        bold = italic = 0
        link: str | None = None
        link_text: list[str] = []
        for child in children:
            kind = child.type
            if kind == "strong_open":
                bold += 1
            elif kind == "strong_close":
                bold -= 1
            elif kind == "em_open":
                italic += 1
            elif kind == "em_close":
                italic -= 1
            elif kind == "link_open":
                link, link_text = str(child.attrGet("href") or ""), []
            elif kind == "link_close" and link is not None:
                self._hyperlink(paragraph, "".join(link_text) or link, link)
                if self.footnote is not None and link.startswith("http"):
                    paragraph.add_run(f" {link}")
                link = None
            elif kind == "footnote_ref":
                paragraph.add_run(f"[{int(child.meta['id']) + 1}]")
            elif kind in ("softbreak", "hardbreak"):
                if link is not None:
                    link_text.append(" ")
                elif kind == "softbreak":
                    paragraph.add_run(" ")
                else:
                    paragraph.add_run().add_break()
            elif kind in ("text", "code_inline"):
                if link is not None:
                    link_text.append(child.content)
                    continue
                run = paragraph.add_run(child.content)
                run.bold = bold > 0 or None
                run.italic = italic > 0 or None
                if kind == "code_inline":
                    run.font.name = "Courier New"
                    run.font.size = Pt(10)

    def _hyperlink(self, paragraph: Paragraph, text: str, url: str) -> None:
        """Add `text` linking to `url`: python-docx reads hyperlinks but has no call to write one."""
        relation = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
        hyperlink = OxmlElement("w:hyperlink")
        hyperlink.set(qn("r:id"), relation)
        run = OxmlElement("w:r")
        properties = OxmlElement("w:rPr")
        colour = OxmlElement("w:color")
        colour.set(qn("w:val"), _LINK_COLOUR)
        underline = OxmlElement("w:u")
        underline.set(qn("w:val"), "single")
        properties.append(colour)
        properties.append(underline)
        run.append(properties)
        content = OxmlElement("w:t")
        content.text = text
        content.set(qn("xml:space"), "preserve")
        run.append(content)
        hyperlink.append(run)
        paragraph._p.append(hyperlink)

    def _table(self, rows: list[list[list[Token]]]) -> None:
        if not rows:
            return
        width = max(len(r) for r in rows)
        table: Any = self.document.add_table(rows=len(rows), cols=width)
        table.style = "Table Grid"
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                self._runs(table.cell(r, c).paragraphs[0], cell)
