"""Guards for the few places that copy a library's code.

A copy is kept only where a measurement shows it pays. Such a module checks the versions
it was written against (`require_version`) and lists what it copies in `COPIED` (dotted
name -> `Copied`); `tests/test_upstream.py` recomputes every fingerprint, so an upgrade
that changes what we copied fails by name instead of running a stale copy.
"""

import hashlib
import importlib
import inspect
import re
from importlib.metadata import version
from typing import NamedTuple


class Copied(NamedTuple):
    """A copied library function: the fingerprint of its source, and why the copy is kept."""

    fingerprint: str
    bench: str  # the measurement that pays for it: command or drill, figures with and without


class UnsupportedVersion(ImportError):
    """An installed library is outside the versions a module that copies its internals knows."""


def _parts(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def require_version(package: str, at_least: str, below: str) -> None:
    """Raise `UnsupportedVersion` unless `at_least <= version(package) < below`."""
    installed = version(package)
    if not _parts(at_least) <= _parts(installed) < _parts(below):
        raise UnsupportedVersion(
            f"{package} {installed} is installed, but this code copies its internals as of "
            f">={at_least},<{below}: install a version in that range (pyproject.toml pins it)"
        )


def resolve(dotted: str) -> object:
    """Return the object a dotted name such as `saq.queue.redis.RedisQueue.sweep` names."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def fingerprint(dotted: str) -> str:
    """Return a short hash of the source of what `dotted` names, blind to indentation and blanks."""
    source = inspect.getsource(resolve(dotted))  # type: ignore[arg-type]
    normal = "\n".join(line.strip() for line in source.splitlines() if line.strip())
    return hashlib.sha256(normal.encode()).hexdigest()[:16]
