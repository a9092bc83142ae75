"""The code that copies a library's internals still matches the library installed.

Each such module fingerprints what it copies (`COPIED`). When an upgrade changes one of
those, this test names it: read the library's new code, bring the copy in line, then
record the new fingerprint.
"""

import inspect
import re
from types import ModuleType

import pytest
from saq.queue.redis import RedisQueue

from core.upstream import Copied, UnsupportedVersion, fingerprint, require_version
from service import saq_queue
from stores import sqlite_saver

COPYING: list[ModuleType] = [saq_queue, sqlite_saver]
CASES = [(m.__name__, name, copied) for m in COPYING for name, copied in m.COPIED.items()]


@pytest.mark.parametrize(("module", "name", "copied"), CASES, ids=[c[1] for c in CASES])
def test_what_we_copy_is_what_the_library_has(module: str, name: str, copied: Copied) -> None:
    assert fingerprint(name) == copied.fingerprint, (
        f"{name} changed in the installed library; {module} copies or builds on it: "
        "check the copy against the new code, then update its fingerprint in COPIED"
    )


@pytest.mark.parametrize(("module", "name", "copied"), CASES, ids=[c[1] for c in CASES])
def test_every_copy_names_the_measurement_that_pays_for_it(
    module: str, name: str, copied: Copied
) -> None:
    assert any(c.isdigit() for c in copied.bench), f"{module} copies {name} without its figures"


def _lua(source: str) -> str:
    return " ".join(source.split())


def test_the_sweep_script_is_saqs_own() -> None:
    """Ours runs saq's script unchanged (only what it does with the jobs differs)."""
    upstream = re.search(r'"""(.*?)"""', inspect.getsource(RedisQueue.sweep), re.S)
    assert upstream is not None
    assert _lua(saq_queue._ACTIVE_JOBS) == _lua(upstream.group(1))


def test_a_version_outside_the_range_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedVersion, match=r"saq .* installed.*>=0\.1,<0\.2"):
        require_version("saq", "0.1", "0.2")
    require_version("saq", "0.26.4", "0.27")  # the installed one passes
