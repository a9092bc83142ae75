"""The progress lines of a run, printed from its events as the service stores them."""

from typing import Any

from rich.markup import escape

from app.cli_common import err


class ProgressPrinter:
    """Prints one line per step and event, to stderr so the report alone goes to stdout."""

    def __init__(self) -> None:
        self.sources = 0
        self.tokens = 0
        self.structured: dict[str, str] = {}  # the structured-output method said per model

    def __call__(self, name: str, data: Any) -> None:
        """Report one event of the run (`service.execution` names them)."""
        if not isinstance(data, dict):
            return
        if name == "node_finished":
            iteration = data.get("iteration")
            suffix = f" · iteration {iteration}" if iteration is not None else ""
            err.print(f"[cyan]●[/] {data['node']}{suffix} · {self.sources} sources")
        else:
            self._event(name, data)

    def _event(self, kind: str, event: dict[str, Any]) -> None:
        if kind == "source":
            self.sources += 1
        elif kind == "note":
            outcome = (
                f"{event['results']} results, {event['new']} new"
                if event["status"] == "ok"
                else event["status"]
            )
            if event.get("pages_read"):
                outcome += f", {event['pages_read']} pages read"
            if event.get("page_errors"):
                outcome += f", {event['page_errors']} pages unreadable"
            err.print(f"  [dim]search[/] {escape(repr(event['query']))}: {outcome}")
        elif kind == "plan":
            plan = event["plan"]
            edited = " (edited)" if event.get("edited") else ""
            err.print(
                f"[cyan]●[/] plan{edited}: {len(plan['investigation_points'])} points, {len(plan['search_queries'])} queries"
            )
        elif kind == "review":
            verdict = "passed" if event["approved"] else "needs work"
            err.print(
                f"  [dim]review[/] draft {event['version']}: {event['overall_score']:.2f} ({verdict})"
            )
        elif kind == "fallback":
            err.print(f"  [yellow]fallback[/] {event['step']}: {escape(event['reason'])}")
        elif kind == "repair":
            err.print(f"  [dim]repair[/] {event['step']}: {escape(event['error'])}")
        elif kind == "structured_output" and event["method"] != self.structured.get(event["model"]):
            self.structured[event["model"]] = event["method"]
            refused = ", ".join(event["refused"]) or "none"
            err.print(
                f"  [dim]structured output[/] {escape(event['model'])}: {event['method']}"
                f" (refused by the server: {escape(refused)})"
            )
        elif kind == "usage" and event["total"]["tokens"] > self.tokens:
            total = event["total"]
            self.tokens = total["tokens"]
            err.print(f"  [dim]usage[/] {total['tokens']} tokens, ${total['cost_usd']:.4f}")
