"""The usage index's files on disk: the manifest, the lock, the column types, and the DuckDB database per manifest.

Kept in ``<data dir>/usage/``::

    files.json                              the manifest: which files make up the index, and the session files read
    calls/day=YYYY-MM-DD/<gen>-<id>.parquet one row per call (main session, subagents, compaction calls) of a day
    tool_results/day=…/<gen>-<id>.parquet   one row per tool result (tool, estimated tokens) of a day
    sessions-<gen>-<id>.parquet             one row per session file (peak fullness, compactions, the agent's own cost)
    call_rollup-<gen>-<id>.parquet          the calls summed per (day, agent, project, session file, model)
    tool_rollup-<gen>-<id>.parquet          per (day, tool, session file): its results (count, tokens, largest) and
                                            the calls that used it (count, cost)
    session_rollup-<gen>-<id>.parquet       one row per session file over all its days (the sessions table's row
                                            joined): what the whole range's session list reads
    .lock                                   one writer at a time (flock; the holder's pid inside)

(the rows: :mod:`engine.usage.rows`; the rollups' SQL: :mod:`engine.usage.queries`; the writes and the repairs:
:mod:`engine.usage.writer`.)

**The manifest is the index.** Data files are immutable: a write puts new files under fresh names beside the old
ones, then replaces ``files.json`` atomically (fsync'd: :func:`engine.store.fsutil.atomic_write_bytes`). Its first
line names, per table, exactly the Parquet files that make up the index (a file per day of ``calls`` and
``tool_results``, the sessions file, the three rollups), with a generation number and a token of this write; its
second line holds the session files read (size + mtime, their days, their session row). A crash at any moment
leaves the old manifest or the new one, each naming complete files: never a mix. Files no manifest names (the
ones a write replaced, what a killed writer left) are removed after the switch, and as leftovers by the next
writer. Readers (:meth:`engine.usage.index.UsageIndex.connect`, the queries, :mod:`engine.usage.report`) read the
manifest's first line once and query exactly the files it lists (explicit lists: a user's path is never a glob
pattern; a data dir whose path DuckDB would take for one is reached through a private symbolic link:
:func:`duck_folder`); a reader that loses a race (a file removed after it read the manifest) tries again on the new
manifest. The process's DuckDB database is kept per manifest token (:func:`cursor`).

**The lock** (:func:`locked`) is taken without blocking, in a loop: after a second, a callback says which process
holds it; after :data:`LOCK_WAIT` seconds the update is given up (:class:`IndexBusy`) and the index answers as it is
(a warning says so). An index that cannot be written (read-only data dir: :class:`IndexReadOnly`) answers as it is.

Rows reach DuckDB as text cast in SQL (:func:`load_rows`): a number DuckDB cannot hold becomes NULL (``TRY_CAST``)
and is counted. Paths that are not UTF-8 are kept exactly in the manifest (JSON escapes) and shown with their bytes
escaped.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.sources.model import shown_path
from engine.usage.queries import CALL_ROLLUP, ROLLUP_VERSION, ROLLUPS, SESSION_ROLLUP, TOOL_ROLLUP, sql_str
from engine.usage.rows import CALL_COLUMNS, SESSION_COLUMNS, TOOL_COLUMNS

MANIFEST = "files.json"
INDEX_VERSION = 2  # 2: the manifest names every data file (1: the files were found by globbing)
LOCK_FILE = ".lock"
LOCK_WAIT = 15.0  # seconds an update waits for another process's update before answering from the index as it is
LOCK_SAY_AFTER = 1.0  # seconds of waiting before the wait is said
ROLLUP_MARKER = "rollups-version"  # what older versions marked their rollups' version with (removed when found)


class UsageIndexError(Exception):
    """The usage index cannot be read or written; the text names the index (and the file) and what was wrong."""


class IndexBusy(UsageIndexError):
    """Another process held the index's lock for longer than the wait."""


class IndexReadOnly(UsageIndexError):
    """The index's folder cannot be written."""


TABLES = ("calls", "tool_results")  # the tables kept as one file per day
SINGLE = ("sessions", *ROLLUPS)  # the tables kept as one file
_DAY_NAME = re.compile(r"(calls|tool_results)/day=\d{4}-\d\d-\d\d/[0-9]{6}-[0-9a-f]{12}\.parquet")
_SINGLE_NAME = re.compile(r"(sessions|call_rollup|tool_rollup|session_rollup)-[0-9]{6}-[0-9a-f]{12}\.parquet")


@dataclass
class Manifest:
    """What ``files.json`` says: the files that make up the index (names relative to its folder) and, when read
    whole, the session files read. ``valid`` False: no manifest of this version (a new index, an older one, or a
    manifest that could not be read: ``problem``)."""

    valid: bool = False
    generation: int = 0
    token: str = ""
    prices: str | None = None
    rollups: int = 0  # the ROLLUP_VERSION its rollups were written by
    days: dict[str, dict[str, str]] = field(default_factory=lambda: {t: {} for t in TABLES})  # table -> day -> name
    single: dict[str, str] = field(default_factory=dict)  # "sessions" / a rollup -> name
    files: dict[str, Any] = field(default_factory=dict)  # session file path -> {stamp, file_id, days, session}
    problem: str = ""
    sizes: dict[str, int] = field(default_factory=dict)  # data file -> its size as written (a cheap check)

    def listed(self) -> list[str]:
        """Every data file the manifest names (relative names)."""
        return [*(n for t in TABLES for n in self.days[t].values()), *self.single.values()]

    def rollups_current(self) -> bool:
        """Whether every rollup is there, written by this version (:data:`ROLLUP_VERSION`)."""
        return self.rollups == ROLLUP_VERSION and all(name in self.single for name in ROLLUPS)

    def copy(self) -> Manifest:
        return Manifest(self.valid, self.generation, self.token, self.prices, self.rollups,
                        {t: dict(d) for t, d in self.days.items()}, dict(self.single), dict(self.files), self.problem,
                        dict(self.sizes))

    def header(self) -> dict[str, Any]:
        return {"version": INDEX_VERSION, "generation": self.generation, "token": self.token, "prices": self.prices,
                "rollups": self.rollups, "days": self.days, "single": self.single, "sizes": self.sizes}

    def to_bytes(self) -> bytes:
        """Two lines of JSON: the header (what readers read) and the session files. ASCII only (a path that is
        not UTF-8 keeps its surrogate escapes as ``\\\\udcNN``, read back exactly)."""
        head = json.dumps(self.header(), separators=(",", ":"))
        files = json.dumps({"files": self.files}, separators=(",", ":"))
        return f"{head}\n{files}\n".encode("ascii")


def read_manifest(root: Path, *, whole: bool = True) -> Manifest:
    """The manifest of the index in ``root``; with ``whole`` False only its first line (what readers need)."""
    path = root / MANIFEST
    try:
        with open(path, "rb") as fh:
            head = fh.readline()
            rest = fh.readline() if whole else b""
    except FileNotFoundError:
        return Manifest()
    except OSError as exc:
        return Manifest(problem=f"{shown_path(path)}: cannot read: {exc.strerror or exc}")
    try:
        header = json.loads(head)
        if not isinstance(header, dict):
            raise ValueError("not an object")
        if header.get("version") != INDEX_VERSION:
            return Manifest(problem=f"{shown_path(path)}: written by another version ({header.get('version')!r})")
        days = header.get("days")
        single = header.get("single")
        if not isinstance(days, dict) or not isinstance(single, dict):
            raise ValueError("no file list")
        m = Manifest(True, int(header.get("generation") or 0), str(header.get("token") or ""),
                     header.get("prices") if isinstance(header.get("prices"), str) else None,
                     int(header.get("rollups") or 0))
        for table in TABLES:
            listing = days.get(table) or {}
            if not isinstance(listing, dict):
                raise ValueError(f"the {table} list is no object")
            for day, name in listing.items():
                if not isinstance(name, str) or not _DAY_NAME.fullmatch(name) or f"day={day}/" not in name:
                    raise ValueError(f"{name!r} is no day file of the index")
                m.days[table][str(day)] = name
        for kind, name in single.items():
            if kind not in SINGLE or not isinstance(name, str) or not _SINGLE_NAME.fullmatch(name) \
                    or not name.startswith(f"{kind}-"):
                raise ValueError(f"{name!r} is no {kind} file of the index")
            m.single[kind] = name
        sizes = header.get("sizes") or {}
        if isinstance(sizes, dict):
            m.sizes = {str(k): v for k, v in sizes.items() if isinstance(v, int) and not isinstance(v, bool)}
        if whole:
            files = json.loads(rest).get("files")
            if not isinstance(files, dict):
                raise ValueError("no session file list")
            m.files = files
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        return Manifest(problem=f"{shown_path(path)}: damaged ({exc}): the index is built again")
    return m


# --------------------------------------------------------------------------- the lock


def _holder(fd: int) -> str:
    """The pid the lock's holder wrote into the lock file, as " (pid N)", or ""."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextlib.contextmanager
def locked(path: Path, *, wait: float = LOCK_WAIT, say: Callable[[str], None] | None = None) -> Iterator[None]:
    """One writer at a time: a POSIX advisory lock on ``path`` (elsewhere no lock), taken without blocking in a
    loop. After :data:`LOCK_SAY_AFTER` s ``say`` is told which process holds it; after ``wait`` s IndexBusy. The
    holder's pid is written into the file. IndexReadOnly when the folder or the lock file cannot be written."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(errno.EACCES, "the folder is not writable")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise IndexReadOnly(f"the usage index in {shown_path(folder)} is read-only "
                            f"({exc.strerror or exc})") from None
    try:
        try:
            import fcntl
        except ImportError:  # no advisory locks here
            yield
            return
        started = time.monotonic()
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise IndexReadOnly(f"the usage index in {shown_path(folder)} cannot be locked "
                                        f"({exc.strerror or exc})") from None
            waited = time.monotonic() - started
            if waited >= wait:
                raise IndexBusy(f"another ctxbench process{_holder(fd)} is updating the usage index in "
                                f"{shown_path(folder)}: gave up waiting after {waited:.0f} s")
            if not said and waited >= LOCK_SAY_AFTER and say is not None:
                say(f"waiting for another ctxbench process{_holder(fd)} that is updating the usage index…")
                said = True
            time.sleep(0.05)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- Parquet files and DuckDB


def empty_relation(columns: Mapping[str, str]) -> str:
    """An empty relation of ``columns`` (name -> DuckDB type), for a table the index holds no file of."""
    return "(SELECT " + ", ".join(f'NULL::{v} AS "{k}"' for k, v in columns.items()) + " LIMIT 0)"


def copy_to(con: Any, query: str, target: Path) -> int:
    """Write the rows of ``query`` to the new Parquet file ``target`` (a fresh name no manifest knows yet: a write
    stopped midway leaves a file nobody reads, removed later); the rows written."""
    try:
        return int(con.execute(f"COPY ({query}) TO {sql_str(str(target))} (FORMAT PARQUET)").fetchall()[0][0])
    except BaseException:
        with contextlib.suppress(OSError):
            target.unlink()
        raise


def fsync_file(path: Path) -> None:
    """Flush the file at ``path`` to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_GLOB_CHARS = re.compile(r"[*?\[\]{},]")
_ALIASES: dict[str, Path] = {}  # index folder -> a private symbolic link to it that DuckDB reads as it is
_ALIAS_LOCK = threading.Lock()


def duck_folder(root: Path) -> Path:
    """``root`` as DuckDB is given it. DuckDB takes every path it reads as a glob pattern (``[1]`` would match
    ``1``, ``*`` anything), and needs UTF-8 text: a folder whose path has such characters, or is not UTF-8, is
    reached through a symbolic link of a plain name in a private temporary folder (made once per process)."""
    text = str(root.absolute())
    try:
        text.encode("utf-8")
        plain = _GLOB_CHARS.search(text) is None
    except UnicodeEncodeError:
        plain = False
    if plain:
        return Path(text)
    with _ALIAS_LOCK:
        alias = _ALIASES.get(text)
        if alias is None:
            holder = Path(tempfile.mkdtemp(prefix="ctxbench-usage-"))
            alias = holder / "index"
            os.symlink(root.absolute(), alias, target_is_directory=True)
            atexit.register(shutil.rmtree, holder, True)
            _ALIASES[text] = alias
        return alias


def listing(folder: Path, names: list[str]) -> str:
    """The SQL list of the files ``names`` (relative to the index folder, as DuckDB reaches it)."""
    return "[" + ", ".join(sql_str(str(folder / n)) for n in names) + "]"


def import_soon() -> None:
    """Import DuckDB and NumPy (what writing rows needs) in a thread of their own, so that the imports overlap what the
    process waits for (a first index's worker processes making rows) instead of following it. Call it once the worker
    processes are started: a process forked while another thread imports could hang."""
    if "duckdb" not in sys.modules or "numpy" not in sys.modules:
        threading.Thread(target=_import_writing, name="ctxbench-import", daemon=True).start()


def _import_writing() -> None:
    with contextlib.suppress(ImportError):  # (then the writer's own import says what is wrong)
        import duckdb  # noqa: F401
        import numpy  # noqa: F401


_LIST_SEP = "\x1f"  # joins a list column's items on their way into DuckDB (see load_rows)
LOAD_BATCH = 20_000  # rows handed to DuckDB at a time
_NUMBERS = ("BIGINT", "INTEGER", "DOUBLE")


def _db_text(text: str) -> str:
    """``text`` as DuckDB can hold it (UTF-8): a lone surrogate (a file name that is not UTF-8, a JSON ``\\\\ud800``)
    shown escaped (``\\\\xff`` for a byte of a file name)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


_RANGES = {"BIGINT": 2**63, "INTEGER": 2**31}


def fits(value: Any, kind: str) -> bool:
    """Whether ``value`` (a row's value of a number column) is one DuckDB's ``kind`` holds as it is."""
    if value is None or (isinstance(value, float) and kind == "DOUBLE"):
        return True
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    limit = _RANGES.get(kind)
    return limit is None or -limit <= value < limit


def all_fit(values: list[Any], kind: str) -> bool:
    """Whether every value of ``values`` (a number column's) is one DuckDB's ``kind`` holds as it is (as
    :func:`fits` says of each; plain ints within range and floats checked in C, the rest one by one)."""
    present = [v for v in values if v is not None]
    ints = [v for v in present if type(v) is int]
    if kind == "DOUBLE":
        plain = len(ints) + sum(1 for v in present if type(v) is float) == len(present)
    else:
        limit = _RANGES.get(kind)
        plain = len(ints) == len(present) and (limit is None or not ints
                                              or (-limit <= min(ints) and max(ints) < limit))
    return plain or all(fits(v, kind) for v in values)


def _plain_text(values: list[Any]) -> bool:
    """Whether every value of ``values`` is None or an ASCII ``str`` (checked in C: a first index's text columns are;
    then each is handed to DuckDB as it is, as :func:`_db_text` would give it)."""
    texts = [v for v in values if v is not None]
    return set(map(type, texts)) <= {str} and "".join(texts).isascii()


def _transposed(rows: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]] | None:
    """Each key's values when every row of ``rows`` has the same keys in the same order (the rows of one table as
    :mod:`engine.usage.rows` makes them): taken apart in C; else None (read row by row)."""
    if not rows:
        return None
    keys = tuple(rows[0])
    if any(tuple(row) != keys for row in rows):
        return None
    return dict(zip(keys, zip(*(row.values() for row in rows), strict=True), strict=True))


def _text_columns(columns: Mapping[str, str], rows: list[dict[str, Any]],
                  suspect: list[bool] | None = None) -> dict[str, Any]:
    """``rows`` as one NumPy array per column, for :func:`load_rows`: a number column whose values its type holds as
    they are as a masked array of numbers (None masked: NULL), any other column as text (or None); ``suspect[0]``
    set True when a number column holds a value its type cannot hold as it is (that column: text)."""
    import numpy as np

    arrays: dict[str, Any] = {}
    by_column = _transposed(rows)
    for k, kind in columns.items():
        found = by_column.get(k) if by_column is not None else None
        values = list(found) if found is not None else [row.get(k) for row in rows]
        if kind in _NUMBERS and all_fit(values, kind):  # handed over as numbers (NULL where masked): no text made
            typed = np.float64 if kind == "DOUBLE" else np.int64
            arrays[k] = np.ma.masked_array(np.array([0 if v is None else v for v in values], dtype=typed),
                                           mask=np.array([v is None for v in values], dtype=bool))
            continue
        if suspect is not None and kind in _NUMBERS:
            suspect[0] = True
        if kind.endswith("[]"):
            arrays[k] = np.array([_db_text(_LIST_SEP.join(map(str, v))) if v else "" for v in values], dtype=object)
        elif _plain_text(values):  # text and None only, all ASCII: as they are (what _db_text gives each)
            arrays[k] = np.array([*values, ""], dtype=object)[:-1]
        else:  # the "" keeps a column of only None as text
            arrays[k] = np.array([v if v is None else _db_text(v) if isinstance(v, str) else repr(v)
                                  for v in values] + [""], dtype=object)[:-1]
    return arrays


def load_rows(con: Any, name: str, columns: Mapping[str, str], rows: list[dict[str, Any]]) -> int:
    """``rows`` as the temporary table ``name`` of ``columns``: handed to DuckDB as one NumPy array per column
    (numbers as a masked array of int64 or float64 when the column's type holds every value as it is, else as
    their ``repr``, which reads back exactly; text as text; a list column as its items joined by U+001F), cast
    to the column's type in SQL, so that DuckDB never guesses a type from a sample. A value that
    is no value of its column (a time that is no time, a number out of range) is NULL; the rows with a number
    out of range are counted (the count returned)."""
    cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({cols})")
    if not rows:
        return 0
    select = []
    bad = []
    for k, kind in columns.items():
        if kind.endswith("[]"):
            select.append(f"CASE WHEN src.\"{k}\" = '' THEN []::{kind} "
                          f"ELSE string_split(src.\"{k}\", chr(31))::{kind} END")
            continue
        select.append(f"TRY_CAST(src.\"{k}\" AS {kind})")
        if kind in _NUMBERS:
            bad.append(f"(src.\"{k}\" IS NOT NULL AND TRY_CAST(src.\"{k}\" AS {kind}) IS NULL)")
    insert = f"INSERT INTO {name} SELECT {', '.join(select)} FROM src_{name} AS src"
    count = f"SELECT count(*) FROM src_{name} AS src WHERE {' OR '.join(bad) or 'FALSE'}"
    rejected = 0
    for start in range(0, len(rows), LOAD_BATCH):  # in batches: the text of a first index stays small
        suspect = [False]
        con.register(f"src_{name}", _text_columns(columns, rows[start:start + LOAD_BATCH], suspect))
        try:
            con.execute(insert)
            if suspect[0]:  # counted only when a value looked out of range (the readers' are in range)
                rejected += int(con.execute(count).fetchall()[0][0])
        finally:
            con.unregister(f"src_{name}")
    return rejected


def is_duckdb_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of DuckDB's errors."""
    return isinstance(exc, duckdb_errors())


def duckdb_errors() -> tuple[type[Exception], ...]:
    """DuckDB's errors, as an ``except`` clause names them (DuckDB is imported only when the index is used)."""
    import duckdb

    return (duckdb.Error,)


_EXPECTED: dict[str, list[str]] = {}


def expected_columns() -> dict[str, list[str]]:
    """The columns of each kind of data file, in the order the index writes them."""
    if not _EXPECTED:
        import duckdb

        con = duckdb.connect()
        try:
            for name, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS),
                                  ("sessions", SESSION_COLUMNS)):
                cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
                con.execute(f"CREATE TABLE {name} ({cols})")
                _EXPECTED[name] = list(columns)
            for name, query in (("call_rollup", CALL_ROLLUP.format(source="calls")),
                                ("tool_rollup", TOOL_ROLLUP.format(results="tool_results", calls="calls")),
                                ("session_rollup", SESSION_ROLLUP.format(calls="call_rollup", sessions="sessions"))):
                con.execute(f"CREATE TABLE {name} AS {query}")
                _EXPECTED[name] = [d[0] for d in con.execute(f"SELECT * FROM {name}").description]
        finally:
            con.close()
    return _EXPECTED


_DATABASES: dict[tuple[str, str], Any] = {}  # (index folder, manifest token) -> its in-memory database
_DATABASES_LOCK = threading.Lock()
MAX_DATABASES = 8


def cursor(root: Path, m: Manifest) -> Any:
    """A cursor of the in-memory DuckDB database this process keeps for the index in ``root`` as manifest ``m``
    names it (made by :func:`database` the first time; the databases of older manifests dropped)."""
    key = (str(root.absolute()), m.token)
    with _DATABASES_LOCK:
        base = _DATABASES.get(key)
        if base is None:
            base = database(root, m)
            for old in [k for k in _DATABASES if k[0] == key[0]]:
                del _DATABASES[old]  # the old manifest's: dropped (its open cursors keep it alive)
            _DATABASES[key] = base
            while len(_DATABASES) > MAX_DATABASES:
                del _DATABASES[next(iter(_DATABASES))]
        return base.cursor()


def database(root: Path, m: Manifest) -> Any:
    """An in-memory DuckDB database whose views read the files manifest ``m`` names in ``root`` (empty tables for a
    table it names no file of; rollups of another version built in memory from the rows)."""
    import duckdb

    folder = duck_folder(root)
    con = duckdb.connect()
    try:
        for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
            files = sorted(m.days[table].values())
            if files:  # every day file is written with the table's columns (no union_by_name: binds 3× faster)
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({listing(folder, files)})")
            else:
                cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
                con.execute(f"CREATE TABLE {table} ({cols})")
        if "sessions" in m.single:
            con.execute("CREATE VIEW sessions AS SELECT * FROM "
                        f"read_parquet({listing(folder, [m.single['sessions']])})")
        else:
            cols = ", ".join(f'"{k}" {v}' for k, v in SESSION_COLUMNS.items())
            con.execute(f"CREATE TABLE sessions ({cols})")
        if m.rollups_current():  # views, read when queried (as tables: 40 ms more for a process's first query)
            for name in ROLLUPS:
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM "
                            f"read_parquet({listing(folder, [m.single[name]])})")
        else:  # none, or of another version: built from the rows, in memory (written by the next update)
            con.execute("CREATE TABLE call_rollup AS " + CALL_ROLLUP.format(source="calls"))
            con.execute("CREATE TABLE tool_rollup AS "
                        + TOOL_ROLLUP.format(results="tool_results", calls="calls"))
            con.execute("CREATE TABLE session_rollup AS "
                        + SESSION_ROLLUP.format(calls="call_rollup", sessions="sessions"))
    except BaseException:
        con.close()
        raise
    return con


def forget_databases() -> None:
    """Drop the databases this process keeps per manifest (the next query makes its own: a process's first)."""
    with _DATABASES_LOCK:
        _DATABASES.clear()
