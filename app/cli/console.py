"""What every `research-agent` command shares: its consoles, one-line errors, settings."""

import sys
from typing import NoReturn

import click
from pydantic import ValidationError
from pydantic_settings import SettingsError
from rich.console import Console
from rich.markup import escape

from app.settings import Settings

BAD_INPUT = 2
# Never hard-wrapped (a pipe is 80 columns to rich): ids, paths and commands stay whole
# for copy and paste, and a terminal wraps long lines itself.
err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    """Print a one-line error and exit with the bad-input code."""
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise click.exceptions.Exit(BAD_INPUT)


# How the fields of a research request are spelled on the command line.
_FLAGS = {"topic": "TOPIC", "time_budget_s": "--time-budget", "approval": "--approve"}


def explain(exc: ValidationError, flags: bool = False) -> str:
    """Return one line naming each bad field (as a command-line flag when `flags`) and the reason."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "input"
        if flags:
            name = str(error["loc"][-1]) if error["loc"] else "input"
            where = _FLAGS.get(name, "--" + name.replace("_", "-"))
        # A validator's own message says what to do; pydantic's prefix adds nothing to it.
        parts.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def load_settings() -> Settings:
    """Settings, or a one-line error naming the bad field."""
    try:
        return Settings()
    except ValidationError as exc:
        fail(
            f"invalid configuration ({explain(exc)}); check the RESEARCH_* variables and the config file"
        )
    except SettingsError as exc:  # a variable that should hold JSON does not
        fail(f"invalid configuration ({exc}: write it as JSON)")


def print_report(report: str) -> None:
    """Write the report to stdout byte for byte (no markup, no wrapping, no emoji codes)."""
    sys.stdout.write(report if report.endswith("\n") else report + "\n")
    sys.stdout.flush()


def interrupted_before_start(thread_id: str) -> NoReturn:
    """Say that a run stopped before its thread existed: there is nothing to resume."""
    err.print(
        f"\n[yellow]interrupted[/] before thread {escape(thread_id)} was created: nothing "
        "was saved; start it again with `research-agent run`"
    )
    raise click.exceptions.Exit(130) from None
