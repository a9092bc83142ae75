"""The extractive briefing as Markdown: summary, key findings, analysis by point, references.

Footnotes are numbered in order of first use; what came from outside is written as text.
"""

from core.markdown import markdown_text
from core.models import ResearchPlan, SearchResult
from core.urls import markdown_url, normalize_url
from engines.extractive_candidates import Candidate
from engines.relevance import TITLED
from engines.report_markdown import GAPS_SECTION

MAX_FINDINGS = 5
# A key finding comes from a source about the subject (engines.relevance: DEVOTED or
# closer), not from a sentence that names it in passing (`PASSING`).
KEY_FINDING_TOPICAL = 0.7


def may_lead(candidate: Candidate) -> bool:
    """Return whether the sentence may lead its point, and so become its key finding."""
    return candidate.topical >= KEY_FINDING_TOPICAL and (
        candidate.named or candidate.about >= TITLED
    )


class _Footnotes:
    """Number footnotes in order of first use, and keep the source each stands for."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}
        self._sources: dict[str, SearchResult] = {}

    def cite(self, candidate: Candidate) -> str:
        """Return the sentence with its footnote mark (and a full stop if it had none).

        Two sentences quoted together are each marked: each is a claim of its own.
        """
        key = normalize_url(candidate.source.url)
        if key not in self._numbers:
            self._numbers[key] = len(self._numbers) + 1
            self._sources[key] = candidate.source
        number = self._numbers[key]
        opening = candidate.opening
        sentences = (
            [opening, candidate.text[len(opening) :].strip()] if opening else [candidate.text]
        )
        marked = []
        for sentence in sentences:
            text = markdown_text(sentence)  # quoted: its own Markdown stays text
            marked.append(
                f"{text}[^{number}]" if text.endswith((".", "!", "?")) else f"{text}.[^{number}]"
            )
        return " ".join(marked)

    def references(self) -> list[str]:
        """Return the References section, empty when nothing was cited."""
        lines = ["## References", ""] if self._numbers else []
        for key, number in self._numbers.items():
            source = self._sources[key]
            title = markdown_text(source.title)
            lines.append(f"[^{number}]: [{title}]({markdown_url(source.url)})")
        return lines


def render(
    plan: ResearchPlan, summary: list[Candidate], by_point: dict[str, list[Candidate]]
) -> str:
    """Return the report in Markdown; `by_point` keeps the plan's order, a point's lead first.

    The points no source addresses are listed once, at the end, as open questions.
    """
    notes = _Footnotes()
    lines = [f"# {markdown_text(plan.theme)}", "", "## Executive Summary", ""]
    lines.append(
        " ".join(notes.cite(c) for c in summary)
        if summary
        else "_The collected sources say little about this topic._"
    )
    lines += ["", "## Key Findings", ""]
    # Three to five findings, the best sentence of each point.
    findings = {
        point: picks[0] for point, picks in by_point.items() if picks and may_lead(picks[0])
    }
    findings = dict(list(findings.items())[:MAX_FINDINGS])
    for point, candidate in findings.items():
        lines.append(f"- **{markdown_text(point)}:** {notes.cite(candidate)}")
    if not findings:
        lines.append("_No finding could be supported by the collected sources._")
    lines += ["", "## Detailed Analysis", ""]
    gaps = [point for point, picks in by_point.items() if not picks]
    analysed = False
    for point, picks in by_point.items():
        rest = picks[1:] if point in findings else picks
        if not rest:
            continue  # its one passage is the key finding, or it is a gap (below)
        lines += [f"### {markdown_text(point)}", "", " ".join(notes.cite(c) for c in rest), ""]
        analysed = True
    if not analysed:
        said = "say nothing beyond the passages above" if summary else "say little about this topic"
        lines += [f"_The collected sources {said}._", ""]
    if gaps:
        lines += [f"## {GAPS_SECTION}", "", "The collected sources do not address:", ""]
        lines += [f"- {markdown_text(point)}" for point in gaps]
        lines.append("")
    lines += notes.references()
    return "\n".join(lines).rstrip() + "\n"
