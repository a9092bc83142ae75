"""Prompt templates, one module per node; the LLM engine fills them.

A template's version is a hash of its module's text (`template_of`), so any change to a
prompt shows as a new version in a model call's evidence.
"""

import hashlib
import inspect
from functools import cache
from types import ModuleType


def _version(*texts: str) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
    return digest.hexdigest()[:16]


@cache
def _templates() -> dict[str, tuple[str, str]]:
    """System prompt text -> (template name, version), for every built-in template."""
    from prompts import planner, questions, researcher, reviewer, writer

    named: list[tuple[ModuleType, str, str]] = [
        (planner, "planner.plan", planner.PLAN_SYSTEM),
        (planner, "planner.route", planner.ROUTE_SYSTEM),
        (researcher, "researcher.summary", researcher.SUMMARY_SYSTEM),
        (researcher, "researcher.gaps", researcher.GAPS_SYSTEM),
        (researcher, "researcher.react", researcher.REACT_SYSTEM),
        (reviewer, "reviewer.review", reviewer.SYSTEM),
        (writer, "writer.write", writer.SYSTEM),
        (questions, "questions.answer", questions.SYSTEM),
    ]
    return {text: (name, _version(inspect.getsource(module))) for module, name, text in named}


def template_of(system_prompt: str, role: str) -> tuple[str, str]:
    """Return the template a call's system prompt comes from: its name and version (`<role>.custom` if set in the settings)."""
    known = _templates().get(system_prompt)
    return known if known is not None else (f"{role}.custom", _version(system_prompt))
