"""Writer prompt: the report structure (title, summary, sections, references), `[^n]` footnotes."""

from collections.abc import Sequence

from core.models import ResearchPlan, SearchResult
from prompts.sources import bullet_list, format_sources

SYSTEM = """You are a Writer of professional research reports.

Requirements:
1. An Executive Summary of 3 to 5 sentences.
2. Key Findings: 3 to 5 bullet points.
3. Detailed Analysis: one subsection per investigation point, using the point as its heading.
4. Every sentence that states a fact ends with a footnote naming its source: [^n], where n
   is the number of the source in the list you are given. Use only those sources; never
   invent a source, a URL or a number. A fact you cannot source is left out.
5. References: one line per cited source, `[^n]: [title](url)`, with the same n.
6. Markdown only, no preamble, no code fences. Write in the same language as the topic.

Structure:
# {theme}

## Executive Summary

## Key Findings

## Detailed Analysis

## References"""


def message(
    plan: ResearchPlan,
    sources: Sequence[SearchResult],
    review_feedback: str | None,
    human_feedback: str | None,
) -> str:
    """The user message: the plan, the numbered sources and any feedback to act on."""
    parts = [
        f"Theme: {plan.theme}",
        "Investigation points:",
        bullet_list(plan.investigation_points),
        "",
        "Sources:",
        format_sources(sources),
    ]
    if review_feedback:
        parts += ["", f"The reviewer of the previous draft asked for: {review_feedback}"]
    if human_feedback:
        parts += ["", f"The person who asked for the report wants: {human_feedback}"]
    return "\n".join(parts)
