"""A scripted research model for the fake LLM server: it answers each prompt as a careful
model would, from what the prompt contains, so graph runs with the LLM engine are real runs.

The writer quotes the first sentence of each numbered source and cites it, so its claims
are supported; switches make it misbehave in the ways the engine must survive.
"""

import re
from dataclasses import dataclass, field

from .fake_llm import Call, Reply, ToolCall

_SOURCE = re.compile(
    r"^\[Source (\d+)\]\nTitle: (.*)\nURL: (\S+)\n(?:Published: .*\n)?Text: (.*)$", re.MULTILINE
)


def first_sentence(text: str) -> str:
    """The text up to its first full stop (all of it when there is none)."""
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).strip()


@dataclass
class ResearchModel:
    """Answers plans, gap checks, routing, summaries, drafts and reviews."""

    queries: list[str] = field(default_factory=lambda: ["printing press", "movable type"])
    review_scores: float = 0.95
    invent_footnote: bool = False  # the writer cites a source it was never given
    cites: bool = True  # False: the writer's draft cites nothing, as small models write
    unsupported_claim: str | None = None  # a cited sentence no source says
    # The ReAct loop: one tool call per turn from this list, then a conclusion.
    actions: list[ToolCall] = field(
        default_factory=lambda: [ToolCall("search", {"query": "Gutenberg Bible"})]
    )
    react_delay_s: float = 0.0
    seen: list[str] = field(default_factory=list)

    def __call__(self, call: Call) -> Reply:
        kind = call.schema_name or (
            "react"
            if "search" in call.tools
            else "write"
            if "Writer of professional" in call.system
            else "summary"
        )
        self.seen.append(kind)
        if kind == "react":
            turns = sum(m.get("role") == "tool" for m in call.messages)
            if turns < len(self.actions):
                return Reply(
                    content=f"Thought: point {turns + 1} still needs sources.",
                    tool_calls=[self.actions[turns]],
                    delay_s=self.react_delay_s,
                )
            return Reply(content="Every point is answered now.", delay_s=self.react_delay_s)
        if kind == "PlanOutput":
            return Reply.json(
                {
                    "investigation_points": ["Origins", "Spread across Europe"],
                    "search_queries": self.queries,
                    "plan_text": "Search the origins, then the spread.",
                }
            )
        if kind == "GapsOutput":
            return Reply.json({"gaps": [], "queries": []})
        if kind == "RouteOutput":
            return Reply.json({"action": "write", "reasoning": "The sources suffice."})
        if kind == "ReviewOutput":
            score = self.review_scores
            return Reply.json(
                {
                    "scores": {
                        "fact_check": score,
                        "completeness": score,
                        "logic": score,
                        "format": score,
                    },
                    "feedback": "Fine." if score >= 0.8 else "Cover the spread better.",
                    "suggested_action": "write",
                    "issues": [],
                }
            )
        if kind == "write":
            report = self.report(call.user)
            return Reply(content=report if self.cites else re.sub(r"\[\^\d+\]:?", "", report))
        return Reply(content="- The sources answer the query [1].")

    def report(self, prompt: str) -> str:
        """A full report (title, summary, sections, references); each sentence quotes its source."""
        theme = re.search(r"^Theme: (.*)$", prompt, re.MULTILINE)
        sources = _SOURCE.findall(prompt)
        claims = [f"{first_sentence(text)}[^{n}]" for n, _title, _url, text in sources[:4]]
        if self.unsupported_claim:
            claims.append(f"{self.unsupported_claim}[^1]")
        references = [f"[^{n}]: [{title}]({url})" for n, title, url, _text in sources[:4]]
        if self.invent_footnote:
            claims.append("Printing reached the Moon in 1450.[^99]")
            references.append("[^99]: [Invented](https://nowhere.example/moon)")
        bullets = "\n".join(f"- {c}" for c in claims)
        return (
            f"# {theme.group(1) if theme else 'Report'}\n\n## Executive Summary\n\n"
            f"{' '.join(claims[:2])}\n\n## Key Findings\n\n{bullets}\n\n"
            f"## Detailed Analysis\n\n### Origins\n\n{' '.join(claims)}\n\n"
            f"### Spread across Europe\n\n{' '.join(claims[1:])}\n\n"
            "## References\n\n" + "\n".join(references) + "\n"
        )
