"""Reading another program's SQLite database (OpenCode's ``opencode.db``, Kilo's ``kilo.db``) while it writes it:
read-only, nothing written beside it, a lock waited for a moment (:func:`with_retries`).

The database is only read, while its agent writes it, and nothing is written beside it (:func:`_plan`):

- a WAL database with no ``-wal`` file (closed cleanly: OpenCode's last connection removes it) is opened
  ``immutable=1``: no lock, no ``-wal`` / ``-shm`` created, no mtime changed (a read that finds the files changed
  under it, a writer having opened it meanwhile, is made again the next way);
- a WAL database with ``-wal`` and ``-shm`` (OpenCode running, or stopped without closing it) is opened
  ``mode=ro`` beside OpenCode. SQLite's WAL readers do write into ``-shm`` (the shared-memory index: their read
  marks); that is the one write left, into a file OpenCode itself keeps, and it is what keeps a checkpoint from
  overwriting pages being read. A private copy would write nothing there but costs the whole database per read:
  measured 55 ms for a 55 MB database and 508 ms for 553 MB (about 1 ms per MB, page cache warm), against 0.2 ms
  for the read itself — too much for a follow that polls every 0.2 s, so it is kept for the next case;
- a WAL database whose ``-wal`` is there but whose ``-shm`` is not (or cannot be written, or in a folder that
  cannot be written): a read-only open would have to create ``-shm`` (and fails where it cannot), so the
  database and its ``-wal`` are copied into a temporary folder, read there and removed (a read-only open that
  fails with SQLITE_READONLY / SQLITE_CANTOPEN falls back to it too);
- a rollback-journal database: ``mode=ro`` (its readers create nothing).

A locked database (SQLITE_BUSY / SQLITE_LOCKED by its result code) is waited for :data:`LOCK_WAIT` (1 s) in all per
read, then :class:`DatabaseBusy`; a database found locked in the last :data:`LOCK_MEMO` seconds, its files
unchanged, is tried once without waiting, so a scan or an index update of many sessions waits once. Anything else
SQLite says (no such table or column, not a database, a malformed image, cannot open) is a SourceError naming the
database and the reason, at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

from engine.sources.model import MAX_COUNT, SourceError, head_regular, open_regular, shown_path

T = TypeVar("T")

LOCK_WAIT = 1.0  # seconds one read (a scan of a database, a poll, a whole read) waits in all for a locked database
BUSY_TIMEOUT = 0.25  # seconds SQLite's busy handler waits in one try (never past what is left of LOCK_WAIT)
RETRIES = 10  # tries of one read at most
LOCK_MEMO = 10.0  # a database found locked this recently, its files unchanged, is tried once without waiting
SQLITE_MAGIC = b"SQLite format 3\x00"


class DatabaseBusy(SourceError):
    """The database stayed locked by another process for the whole wait a read allows (:data:`LOCK_WAIT`):
    busy, not broken; reading it again later may succeed."""


# SQLite's primary result codes (the low byte of the extended code Python gives as ``sqlite_errorcode``)
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_CANTOPEN = 5, 6, 8, 11, 14
WAL_SUFFIXES = ("-wal", "-shm")

# how a database is opened: "ro": read-only, shared (a rollback-journal database, or a WAL database OpenCode has open);
# "immutable": a WAL database nobody has open (no -wal file): nothing is locked, created or written;
# "copy": a private copy of the database and its -wal in a temporary folder (see _plan)
Plan = Literal["ro", "immutable", "copy"]

# a database found locked: (when, its files' stamp then); a read of it within LOCK_MEMO seconds, its files
# unchanged, tries once without waiting (a scan of many sessions of one locked database waits once, not per
# session)
_locked: dict[str, tuple[float, tuple[Any, ...]]] = {}
_locked_guard = threading.Lock()


def _files_stamp(db: Path) -> tuple[Any, ...]:
    """(size, mtime, inode) of the database and of its ``-wal`` and ``-shm`` files (None for one that is not
    there): what tells that the database changed or was opened by a writer."""
    out: list[Any] = []
    for name in (str(db), *(f"{db}{s}" for s in WAL_SUFFIXES)):
        try:
            st = os.stat(name)
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def _header(db: Path) -> bytes:
    """The database's first 100 bytes (its SQLite header); SourceError when it is no such file."""
    try:
        head = head_regular(db, 100)
    except FileNotFoundError:
        raise SourceError(f"{shown_path(db)}: no such database (removed?)") from None
    except OSError as exc:
        raise SourceError(f"{shown_path(db)}: cannot open the database: {exc.strerror or exc}") from None
    except SourceError as exc:
        raise SourceError(f"{shown_path(db)}: {exc}") from None
    if not head.startswith(SQLITE_MAGIC):
        raise SourceError(f"{shown_path(db)}: not an SQLite database (its first bytes are not SQLite's header)")
    return head


def _plan(db: Path) -> Plan:
    """How to read ``db`` without writing anything beside it (see the module text)."""
    head = _header(db)
    if len(head) < 20 or head[18] != 2:  # not in WAL mode (a rollback journal): a read-only reader writes nothing
        return "ro"
    if not os.path.exists(f"{db}-wal"):
        return "immutable"  # closed cleanly (the last connection removes -wal): nobody writes it
    if not os.path.exists(f"{db}-shm") or not os.access(db.parent, os.W_OK) or not os.access(f"{db}-shm", os.W_OK):
        return "copy"  # a read-only open would have to create -shm (or cannot write it): read a private copy
    return "ro"  # OpenCode has it open: read beside it (SQLite's WAL readers update -shm's read marks)


@contextlib.contextmanager
def _private_copy(db: Path) -> Iterator[Path]:
    """A copy of the database and its ``-wal`` in a temporary folder (removed after): what was committed when it
    was taken. Taken again (up to 3 times) when the files changed while it was copied."""
    folder = Path(tempfile.mkdtemp(prefix="ctxbench-opencode-"))
    try:
        target = folder / "opencode.db"
        for _ in range(3):
            before = _files_stamp(db)
            for suffix in ("", "-wal"):
                source = Path(f"{db}{suffix}")
                try:
                    with open_regular(source) as src, open(f"{target}{suffix}", "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                except FileNotFoundError:
                    if not suffix:
                        raise SourceError(f"{shown_path(db)}: no such database (removed?)") from None
                    Path(f"{target}{suffix}").unlink(missing_ok=True)
                except OSError as exc:
                    raise SourceError(f"{shown_path(db)}: cannot copy {source.name} to read it: "
                                      f"{exc.strerror or exc}") from None
            if _files_stamp(db) == before:
                break
        yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _connected(db: Path, plan: Plan, timeout: float) -> Iterator[sqlite3.Connection]:
    with contextlib.ExitStack() as stack:
        if plan == "copy":
            uri = f"file:{_uri_path(stack.enter_context(_private_copy(db)))}?mode=rw"  # ours: it may recover the WAL
        elif plan == "immutable":
            uri = f"file:{_uri_path(db)}?immutable=1"
        else:
            uri = f"file:{_uri_path(db)}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
        stack.callback(conn.close)
        conn.row_factory = sqlite3.Row
        yield conn


def _uri_path(path: Path) -> str:
    return urllib.parse.quote(str(Path(path).resolve()))


def _code(exc: sqlite3.Error) -> int:
    code = getattr(exc, "sqlite_errorcode", None)
    return int(code) & 0xFF if isinstance(code, int) else -1


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite said the database is busy or locked by another connection (SQLITE_BUSY, SQLITE_LOCKED and
    their extended codes): a reason to wait, not a broken database."""
    return _code(exc) in (SQLITE_BUSY, SQLITE_LOCKED)


def is_corrupt(exc: sqlite3.Error) -> bool:
    """Whether SQLite found the pages it read damaged (SQLITE_CORRUPT: "database disk image is malformed")."""
    return _code(exc) == SQLITE_CORRUPT


def _locked_recently(db: Path) -> bool:
    with _locked_guard:
        seen = _locked.get(str(db))
    return seen is not None and time.monotonic() - seen[0] < LOCK_MEMO and seen[1] == _files_stamp(db)


def _note_locked(db: Path, locked: bool) -> None:
    with _locked_guard:
        if locked:
            _locked[str(db)] = (time.monotonic(), _files_stamp(db))
        else:
            _locked.pop(str(db), None)


def read_deadline(db: Path) -> float:
    """When one read of ``db`` stops waiting for a lock (``time.monotonic()``): :data:`LOCK_WAIT` from now, or now
    when it was found locked in the last :data:`LOCK_MEMO` seconds and its files did not change since."""
    return time.monotonic() + (0.0 if _locked_recently(Path(db)) else LOCK_WAIT)


def with_retries(db: Path, work: Callable[[sqlite3.Connection], T], *, deadline: float | None = None) -> T:
    """``work(conn)`` inside one read transaction on a fresh read-only connection (how: :func:`_plan`).

    A locked or busy database is waited for until ``deadline`` (``time.monotonic()``; default: :data:`LOCK_WAIT`
    seconds from now; once, without waiting, when it was found locked in the last :data:`LOCK_MEMO` seconds),
    then :class:`DatabaseBusy`. Anything else SQLite says — no such table or column, not a database, a malformed
    image, cannot open — is a SourceError naming the database and the reason at once."""
    db = Path(db)
    now = time.monotonic()
    if deadline is None:
        deadline = read_deadline(db)
    pause = 0.02
    copy = False  # a read-only open failed for want of writing -shm: read a private copy
    for attempt in range(1, RETRIES + 1):
        plan: Plan = "copy" if copy else _plan(db)
        before = _files_stamp(db) if plan == "immutable" else ()
        try:
            with _connected(db, plan, max(0.0, min(BUSY_TIMEOUT, deadline - time.monotonic()))) as conn:
                conn.execute("BEGIN")
                result = work(conn)
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            left = deadline - time.monotonic()
            if not is_busy(exc):
                if plan == "ro" and _code(exc) in (SQLITE_READONLY, SQLITE_CANTOPEN) and attempt < RETRIES \
                        and _header(db)[18:19] == b"\x02":
                    copy = True  # a WAL database whose -shm cannot be used here: read a private copy
                    continue
                raise SourceError(f"{shown_path(db)}: cannot read the database: {exc}") from None
            if left <= 0 or attempt == RETRIES:
                _note_locked(db, True)
                raise DatabaseBusy(f"{shown_path(db)}: locked by another process (still locked after "
                                   f"{max(0.0, deadline - now):.1f} s)") from None
            time.sleep(min(pause, left))
            pause *= 2
            continue
        if plan == "immutable" and _files_stamp(db) != before and attempt < RETRIES:
            continue  # a writer opened it (or checkpointed) while it was read as unchanging: read it again
        _note_locked(db, False)
        return result
    raise DatabaseBusy(f"{shown_path(db)}: could not be read in {RETRIES} tries")  # pragma: no cover


def good_time(column: str) -> str:
    """SQL: true when ``column`` holds a time :func:`int_or_none` accepts (a number, 0 to 2^53): text, NULL, -1 or
    1e30 in a time column (another program's database is never trusted) is none."""
    return f"(typeof({column}) IN ('integer', 'real') AND {column} >= 0 AND {column} <= {MAX_COUNT})"


def time_order(column: str) -> str:
    """SQL: ``column`` where it is a good time, else NULL (first in an ascending order, last in a descending one)."""
    return f"(CASE WHEN {good_time(column)} THEN {column} END)"
