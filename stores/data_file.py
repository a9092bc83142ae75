"""The SQLite data file as a file: created whole, refused when damaged, its failures named.

A damaged file is refused before it is opened, with one line naming it and what to do
(`check_data_file`); an SQLite error is classified as a full disk, a damaged file or a
failing disk (`storage_failure`), which the API answers 507 or 503.
"""

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Literal


class DamagedDataFile(ValueError):
    """The data file is no sound SQLite database; the message names it and what to do."""


# SQLite's primary result codes for a failing file (an extended code's low byte).
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 10, 11, 13, 26
_FROM_BACKUP = "restore it from a backup"
_RESTORE = f"{_FROM_BACKUP}, or move it away to start with a new, empty one"


def storage_failure(exc: BaseException) -> Literal["full", "damaged", "io"] | None:
    """Classify an SQLite error as a storage failure of the data file, or return None.

    `full`: no room for the write; `damaged`: the file is no sound database; `io`: the
    disk failed a read or write (it may pass).
    """
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == _SQLITE_FULL:
        return "full"
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return "damaged"
    if code == _SQLITE_IOERR:
        return "io"
    return None


def check_data_file(path: Path) -> None:
    """Refuse (DamagedDataFile) a data file that is empty or fails SQLite's quick check.

    An empty file would open as a new database, every earlier thread silently gone; a
    damaged one would start a service that fails its requests one by one.
    """
    if not path.exists():
        return
    if path.stat().st_size == 0:
        raise DamagedDataFile(
            f"the data file {path} is empty (0 bytes): it holds no threads. To start with a "
            f"new database, move it away; else {_FROM_BACKUP}"
        )
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True)) as conn:
            found = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        raise DamagedDataFile(f"the data file {path} cannot be read ({exc}): {_RESTORE}") from None
    if found != ["ok"]:
        problems = " ".join(" ".join(found).split())[:200]
        raise DamagedDataFile(f"the data file {path} is damaged ({problems}): {_RESTORE}")


def create_data_file(path: Path) -> None:
    """Create the data file, unless it exists, whole: never an empty file at its path.

    SQLite writes the header after creating the file, so a kill in between left a 0-byte
    file. The file is made beside it with its header and linked into place (of two
    processes, one link wins).
    """
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    made = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        with closing(sqlite3.connect(str(made))) as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # writes the header: a database now
        try:
            os.link(made, path)
        except FileExistsError:
            pass  # made at the same moment by another process: theirs stands
        except OSError:  # a file system without hard links: a rename, unless it is there now
            if not path.exists():
                os.replace(made, path)
    finally:
        made.unlink(missing_ok=True)
