"""Two runs side by side: which sources came, went or changed, which findings, which scores.

A source is the same in both runs when its normalised URL is; it changed when its text's
hash differs. A finding is a report sentence that cites a source. Models and prompt
template versions come from the runs' evidence.
"""

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from core.urls import normalize_url
from engines.report_markdown import cited_sentences, split_front_matter
from stores.evidence import ModelCallRecord, Record, content_hash


class SourceChange(BaseModel):
    """A source present in one run or both, with the hash of its text in each."""

    url: str
    title: str
    before: str | None = Field(None, description="Content hash in the first run (None: absent).")
    after: str | None = Field(None, description="Content hash in the second run (None: absent).")


class RunSide(BaseModel):
    """One run's figures, as the diff shows them side by side."""

    thread_id: str
    topic: str
    report_status: str | None = None
    sources: int = 0
    cited_claims: int = 0
    supported_share: float | None = Field(None, description="Supported share of cited claims.")
    review_score: float | None = None
    scores: dict[str, float] | None = None
    models: dict[str, str] = Field(
        default_factory=dict, description="Per role: the model the server said it ran."
    )
    templates: dict[str, str] = Field(
        default_factory=dict, description="Prompt template -> version used."
    )


class RunDiff(BaseModel):
    """What differs between two runs (`base` first, `other` second)."""

    base: RunSide
    other: RunSide
    sources_added: list[SourceChange] = Field(default_factory=list)
    sources_removed: list[SourceChange] = Field(default_factory=list)
    sources_changed: list[SourceChange] = Field(default_factory=list)
    sources_unchanged: int = 0
    findings_added: list[str] = Field(default_factory=list)
    findings_dropped: list[str] = Field(default_factory=list)
    findings_kept: int = 0
    templates_changed: list[str] = Field(default_factory=list)


def _key(sentence: str) -> str:
    """Return how findings are compared: case and spacing aside."""
    return " ".join(sentence.casefold().split())


def findings(values: dict[str, Any]) -> dict[str, str]:
    """Return the report's cited sentences, by comparison key, as written."""
    _, body = split_front_matter(values.get("final_report") or "")
    return {_key(s): s for s, refs in cited_sentences(body) if refs}


def _sources(values: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    """Return normalised URL -> (url, title, content hash) of every collected source."""
    return {
        normalize_url(s.url): (s.url, s.title, content_hash(s.content))
        for s in values.get("research_data", [])
    }


def side(thread_id: str, values: dict[str, Any], records: Sequence[Record]) -> RunSide:
    """Return one run's side of the diff."""
    review = values.get("review")
    citations = review.citations if review is not None else None
    calls = [r for r in records if isinstance(r, ModelCallRecord)]
    return RunSide(
        thread_id=thread_id,
        topic=values.get("topic", ""),
        report_status=values.get("report_status"),
        sources=len(values.get("research_data", [])),
        cited_claims=citations.cited_claims if citations else 0,
        supported_share=citations.share if citations else None,
        review_score=review.overall_score if review is not None else None,
        scores=review.scores.model_dump() if review is not None else None,
        models={c.role: c.reported_model or c.model for c in calls},
        templates={
            c.template: c.template_version for c in calls if c.template and c.template_version
        },
    )


def diff_runs(
    base: RunSide, other: RunSide, before: dict[str, Any], after: dict[str, Any]
) -> RunDiff:
    """Return the differences between the run of `before` (its state) and the run of `after`."""
    old, new = _sources(before), _sources(after)
    diff = RunDiff(base=base, other=other)
    for key, (url, title, digest) in new.items():
        if key not in old:
            diff.sources_added.append(SourceChange(url=url, title=title, after=digest))
        elif old[key][2] != digest:
            diff.sources_changed.append(
                SourceChange(url=url, title=title, before=old[key][2], after=digest)
            )
        else:
            diff.sources_unchanged += 1
    for key, (url, title, digest) in old.items():
        if key not in new:
            diff.sources_removed.append(SourceChange(url=url, title=title, before=digest))
    was, now = findings(before), findings(after)
    diff.findings_added = [now[k] for k in now if k not in was]
    diff.findings_dropped = [was[k] for k in was if k not in now]
    diff.findings_kept = sum(k in was for k in now)
    diff.templates_changed = sorted(
        name
        for name in set(base.templates) & set(other.templates)
        if base.templates[name] != other.templates[name]
    )
    return diff
