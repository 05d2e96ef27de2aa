"""An index of every provider call of every agent session on this machine, queried with embedded DuckDB.

Built from the sources scan (:func:`engine.sources.discovery.scan_sources` lists the session files; each is
read with :func:`engine.sources.readers.read_source`, its subagents' files included). A recording proxy's capture
is listed by the scan but not counted here: what it recorded are the calls the agent's own file holds. Kept in
``<data dir>/usage/``, as the manifest names its Parquet files (:mod:`engine.usage.storage`: the manifest is the
index, the lock, the DuckDB database per manifest; damage found and rebuilt: :mod:`engine.usage.writer`). What a
session file becomes: :mod:`engine.usage.rows`; the queries and the rollups' SQL: :mod:`engine.usage.queries`.
:class:`UsageIndex` puts them together: it reads what changed, writes it, and answers queries.

**One bad file never stops the index**: each session file is read and turned into rows on its own; whatever one
raises lands in ``IndexReport.failed`` (path, reason) and the others go on; the scan's unreadable files are
listed there too. A number DuckDB cannot hold becomes NULL (``TRY_CAST``) and is counted
(``IndexReport.bad_values``). Paths that are not UTF-8 are kept exactly in the manifest (JSON escapes) and shown
with their bytes escaped.

**The lock**: an update waits for another process's (after a second a callback says which process holds it); after
:data:`engine.usage.storage.LOCK_WAIT` seconds the update is given up and the index answers as it is (a warning
says so). An index that cannot be written (read-only data dir) answers as it is; when session files changed since
it was written, one warning says so.

Incremental: a file whose size and mtime did not change is not read again; a new or grown file is read
and its rows replace the ones it had (only the days it touches are rewritten, one Parquet file a day). A Claude
Code, Codex or Gemini CLI file that grows while the same :class:`UsageIndex` object lives (the window's) is read
whole once, then only from where its incremental reader stopped (up to :data:`FOLLOWED` files kept); a new
process (``ctxbench usage``) reads a file that grew since the last index whole, once. A last line without its
newline is read as it is (the reader is then not kept: the next growth is read whole). Many files new to the index
are read in worker processes (:func:`engine.usage.rows.rows_of_file`).
A session file that disappears (Claude Code removes old ones) keeps its rows: what was spent stays
spent. A new litellm price table (another litellm version) prices everything again, as rows of another
:data:`engine.usage.rows.ROWS_VERSION` are read again.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, TypeVar, cast

from engine.model.text import format_bytes, printable
from engine.sources import formats
from engine.sources import model as _model
from engine.sources.discovery import Agent, ScanProblem, SourceEntry, scan_sources
from engine.sources.model import SourceError, SourceSession, open_regular, shown_path
from engine.sources.readers import read_source
from engine.sources.tail import Tail
from engine.store.config import Settings, data_dir
from engine.usage import queries
from engine.usage.prices import PriceTable, PriceTableError, litellm_version, load_table
from engine.usage.rows import (
    ROWS_VERSION,
    FileRows,
    WorkerRows,
    bad_said,
    file_id,
    one_hour_of_lines,
    rows_of,
    rows_of_file,
    summary_and_rows,
    worker_start,
)
from engine.usage.storage import (
    LOCK_FILE,
    LOCK_WAIT,
    IndexBusy,
    IndexReadOnly,
    Manifest,
    UsageIndexError,
    cursor,
    duckdb_errors,
    import_soon,
    is_duckdb_error,
    locked,
)
from engine.usage.writer import IndexFiles

INDEX_DIR = "usage"
FOLLOWED = 8  # growing session files whose readers an index keeps (read from where they stopped)
ACTIVE_SECONDS = 3600  # a session file changed this recently is read by a reader that is kept (it may grow)
LIVE_SECONDS = 120  # a first index reads a file changed this recently here, its reader kept (the others: workers)
SETTLED_SECONDS = 2.0  # a file unchanged this long is complete: a last line without its newline is read as it is
# what reading one session file and making its rows may raise: that file is skipped (said), the others go on
FILE_ERRORS: tuple[type[BaseException], ...] = (ValueError, OverflowError, TypeError, KeyError, IndexError,
                                                AttributeError, RecursionError, UnicodeError, SourceError, OSError)

# the formats whose growth is read from where the last read stopped
INCREMENTAL: tuple[str, ...] = formats.names(growth="appended")
COUNTED: tuple[str, ...] = formats.names(in_usage=True)  # what the index counts (see formats.AgentFormat.in_usage)


def index_dir() -> Path:
    """Where the usage index is kept: ``<data dir>/usage``."""
    return data_dir() / INDEX_DIR


@dataclass
class IndexReport:
    """What one :meth:`UsageIndex.update` did."""

    files: int = 0  # session files the scan listed
    read: int = 0  # new or changed: read
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    calls: int = 0  # call rows written for the files read
    tool_results: int = 0
    days_rewritten: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # the index answers as it is (busy, read-only), a file rebuilt
    bad_values: int = 0  # rows with a number DuckDB could not hold (stored as NULL)
    # session files read in part: (path, lines that could not be read, the first of them described); said on every
    # update (kept in the manifest), not only when the file is read
    damaged: list[tuple[str, int, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "read": self.read, "unchanged": self.unchanged,
                "failed": [{"path": p, "reason": r} for p, r in self.failed], "calls": self.calls,
                "tool_results": self.tool_results, "days_rewritten": self.days_rewritten,
                "seconds": round(self.seconds, 3), "warnings": list(self.warnings), "bad_values": self.bad_values,
                "damaged": [{"path": p, "lines": n, "first": f} for p, n, f in self.damaged]}


def _said_damaged(report: IndexReport, path: str, damaged: Any) -> None:
    """Add a session file read in part (the manifest's ``[lines, first]``) to ``report``."""
    if isinstance(damaged, list) and len(damaged) == 2 and isinstance(damaged[0], int) and damaged[0] > 0:
        report.damaged.append((shown_path(path), damaged[0], str(damaged[1])))


def _reason(exc: BaseException) -> str:
    """What went wrong, in a line (an OSError's own words when it has them)."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    elif isinstance(exc, RecursionError):
        text = "nested too deeply"
    else:
        text = str(exc) or type(exc).__name__
    return printable(text if isinstance(exc, SourceError | OSError) else f"{type(exc).__name__}: {text}")


@dataclass
class _Followed:
    """A grown session file's incremental reader, kept by a long-lived :class:`UsageIndex` so that the next
    growth is read from where it stopped (only the appended bytes: the file's :class:`engine.sources.tail.Tail`,
    the one follower of a file every loop that reads appended lines uses)."""

    reader: Any  # ClaudeCodeReader, CodexReader or GeminiCliReader
    tail: Tail  # where the reader stopped; its last line so far, when it has no newline yet, waits in it
    one_hour: dict[str, int] = field(default_factory=dict)  # Claude Code: request id -> one-hour cache writes


def _stamp(entry: SourceEntry) -> list[Any] | None:
    """What tells that a session changed: the file's size and mtime; for a session inside a database
    (OpenCode's ``opencode.db#ses_…``, whose file changes with every session) the scan's own figures."""
    path = Path(entry.path)
    try:
        st = path.stat()
    except OSError:
        if "#" not in entry.path or not Path(entry.path.split("#", 1)[0]).exists():
            return None
        return [entry.last_activity, entry.calls, entry.last_prompt_tokens]
    return [st.st_size, st.st_mtime_ns]


def _changed_within(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except OSError:
        return False


def _active(path: Path) -> bool:
    """Whether ``path`` changed in the last :data:`ACTIVE_SECONDS`: an agent may be writing it."""
    try:
        return time.time() - path.stat().st_mtime < ACTIVE_SECONDS
    except OSError:
        return False


def _reader(agent: str, path: Path) -> Any:
    """A new incremental reader of ``path`` (a format of :data:`INCREMENTAL`)."""
    return formats.appended_reader(agent, path, bulk=True)


def _whole_object(line: bytes) -> bool:
    """Whether ``line`` (a last line without its newline) is a whole JSON object: a line cut while being written
    never is (its braces do not close), so only its newline is missing."""
    if not line.rstrip().endswith(b"}") or len(line) > _model.MAX_LINE_BYTES:
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


T = TypeVar("T")


def _written_errors() -> tuple[type[Exception], ...]:
    """What writing the index may raise that a second attempt or a clear message answers: the disk's, DuckDB's."""
    return (OSError, *duckdb_errors())


def _same(entry: SourceEntry) -> SourceEntry:
    return entry


PROGRESS_SECONDS = 0.25  # an update tells how far its reading has come at most this often (and when all is read)


@dataclass(frozen=True, slots=True)
class IndexProgress:
    """How far an update's reading of session files has come: of the ``files`` it reads whole in this step
    (``bytes`` of them), ``files_done`` (``bytes_done``) are read. A first index reads in one step nearly all it
    reads (the sources scan's); an update that reads files the scan had summaries of reads them in a second."""

    files_done: int
    files: int
    bytes_done: int
    bytes: int

    def said(self) -> str:
        """The one sentence every view shows of it (the CLI's stderr, the window's Usage view)."""
        share = 100 * self.bytes_done // self.bytes if self.bytes else 100 * self.files_done // max(1, self.files)
        return (f"reading session files: {self.files_done:,} of {self.files:,} "
                f"({format_bytes(self.bytes_done)} of {format_bytes(self.bytes)}, {share} %)")


class _Progress:
    """Counts the files of one step as they are read — from any thread: a worker's result comes on the pool's — and
    tells ``say`` at most every :data:`PROGRESS_SECONDS`, and once all are read."""

    def __init__(self, say: Callable[[IndexProgress], None], sizes: Mapping[Any, int]) -> None:
        self.say, self.sizes, self.total = say, sizes, sum(sizes.values())
        self.files = self.size = 0
        self.told = time.monotonic()
        self.lock = threading.Lock()

    def done(self, key: Any) -> None:
        """The file of ``key`` (in ``sizes``) is read. (Told under the lock: in the order counted.)"""
        with self.lock:
            self.files += 1
            self.size += self.sizes[key]
            now = time.monotonic()
            if self.files < len(self.sizes) and now - self.told < PROGRESS_SECONDS:
                return
            self.told = now
            self.say(IndexProgress(self.files, len(self.sizes), self.size, self.total))


class UsageIndex(IndexFiles):
    """The usage index in ``root`` (default ``<data dir>/usage``)."""

    def __init__(self, root: Path | None = None, *, prices: PriceTable | None = None, one_shot: bool = False) -> None:
        """``one_shot``: the object serves one update and its queries (``ctxbench usage``), so no file's reader is
        worth keeping for a next update: a first index reads the files an agent changed in the last
        :data:`LIVE_SECONDS` in the worker processes too (a file whose last line has no newline yet is still read
        here, :meth:`_read`), instead of here one after another with their readers kept."""
        super().__init__(Path(root) if root is not None else index_dir())
        self._prices = prices
        self._one_shot = one_shot
        # incremental readers of Claude Code files that grew while this object lived (most recent last):
        # the next growth of such a file is read from where its reader stopped, not whole
        self._followed: dict[str, _Followed] = {}
        # rows made by the sources scan of this update in the same pass as a file's summary: path -> (stamp, rows)
        self._early: dict[str, tuple[list[int], WorkerRows]] = {}
        self._progress: Callable[[IndexProgress], None] | None = None  # the running update's (see update)

    def _read(self, entry: SourceEntry, grew: bool) -> tuple[SourceSession, dict[str, int] | None, bool]:
        """The session of ``entry`` and, for Claude Code, its main file's one-hour cache writes. A Claude Code,
        Codex or Gemini CLI file that grew, or that changed in the last :data:`ACTIVE_SECONDS` (a session in
        progress), is read by an incremental reader kept for it (at most :data:`FOLLOWED` of them, the most
        recently read): whole the first time, then only what was appended since (its
        :class:`engine.sources.tail.Tail`: the same file, not shorter, its first bytes and those where the last read
        stopped unchanged). A file whose last line has no
        newline: while the file changed in the last :data:`SETTLED_SECONDS` (the agent may be writing that line)
        the line waits in the reader and the third value is True (the read is not final: read the file again
        next time); else the line is read as it is and the reader is not kept (the next read is whole)."""
        path = Path(entry.path)
        if entry.agent not in INCREMENTAL or not (grew or entry.path in self._followed or _active(path)):
            self._followed.pop(entry.path, None)
            return read_source(path, entry.agent), None, False
        kept = self._followed.pop(entry.path, None)
        if kept is None:
            kept = _Followed(_reader(entry.agent, path), Tail(path))
        with open_regular(path) as fh:
            block, reset, _ = kept.tail.read_from(fh, None)  # all there is: complete lines, the last one waiting
            st = os.fstat(fh.fileno())
        if reset is not None:  # replaced, truncated or rewritten in place: read again from its start
            kept = _Followed(_reader(entry.agent, path), kept.tail)
        partial = bytes(kept.tail.partial)  # (an over-long one cut: the reader skips it as such)
        spec = formats.agent_format(entry.agent)
        kept.reader.feed(block)
        if getattr(kept.reader, "bulk", False):  # the whole file, complete lines: scanned, then built once
            kept.reader.settle()
        one_hour: dict[str, int] | None = None
        if spec.cache_hours_in_lines:
            one_hour_of_lines(block.splitlines(), kept.one_hour)
            one_hour = dict(kept.one_hour)
            if partial:  # the last line so far counts in this read, and is read whole next time
                one_hour_of_lines([partial], one_hour)
        if partial:  # a last line without its newline: read as it is when the file has settled or the line is
            # a whole JSON object already (only its newline missing); the file is read again next time unless settled
            settled = time.time() - st.st_mtime >= SETTLED_SECONDS
            if settled or _whole_object(partial):
                kept.reader.feed(partial)  # (held by the reader until finish reads it as the torn last line)
                return kept.reader.finish(), one_hour, not settled  # (the reader is spent: not kept)
        session: SourceSession = (kept.reader.read_beside(subagents=True) if spec.subagents_beside
                                  else kept.reader.session)
        self._followed[entry.path] = kept
        while len(self._followed) > FOLLOWED:
            self._followed.pop(next(iter(self._followed)))
        return session, one_hour, bool(partial)

    def prices(self) -> PriceTable | None:
        if self._prices is None:
            try:
                self._prices = load_table()
            except PriceTableError:
                return None
        return self._prices

    # ------------------------------------------------------------------ update

    def update(self, settings: Settings | None = None, *, refresh: bool = False,
               env: Mapping[str, str] | None = None, home: Path | None = None,
               entries: list[SourceEntry] | None = None, say: Callable[[str], None] | None = None,
               lock_wait: float = LOCK_WAIT, progress: Callable[[IndexProgress], None] | None = None) -> IndexReport:
        """Bring the index up to date with the session files on the machine (see the module's doc). ``say``:
        told when the update waits for another process's (after a second); after ``lock_wait`` s the update is
        given up. A busy or read-only index answers as it is: ``IndexReport.warnings`` says so. UsageIndexError
        when the index cannot be written for another reason (the text names it). ``progress``: told how far the
        reading of session files has come (:class:`IndexProgress`; from this thread or the worker pool's)."""
        started = time.perf_counter()
        report = IndexReport()
        self._early.clear()
        self._progress = progress
        try:
            return self._update(settings, refresh, env, home, entries, say, lock_wait, report, started)
        finally:
            self._progress = None

    def _update(self, settings: Settings | None, refresh: bool, env: Mapping[str, str] | None, home: Path | None,
                entries: list[SourceEntry] | None, say: Callable[[str], None] | None, lock_wait: float,
                report: IndexReport, started: float) -> IndexReport:
        if entries is None:
            problems: list[ScanProblem] = []
            entries = scan_sources(settings, env=env, home=home, index=self.root / "sources-index.json",
                                   problems=problems, summaries=self._summaries)
            report.failed += [(shown_path(p.path), printable(p.reason)) for p in problems]
        entries = [e for e in entries if e.agent in COUNTED]  # not a proxy's capture: its calls are the agent's own
        report.files = len(entries)
        try:
            with locked(self.root / LOCK_FILE, wait=lock_wait, say=say):
                self._update_locked(entries, refresh, report)
        except IndexBusy as exc:
            report.warnings.append(f"{exc}; the figures are the index's as it was")
        except IndexReadOnly as exc:
            self._changed_since(entries, report, str(exc))
        report.seconds = time.perf_counter() - started
        return report

    def _changed_since(self, entries: list[SourceEntry], report: IndexReport, why: str) -> None:
        """A read-only index: count the session files changed since it was written (one warning when some did)."""
        known = self.manifest().files
        changed = 0
        for entry in entries:
            old = known.get(entry.path)
            if isinstance(old, dict) and old.get("stamp") == _stamp(entry):
                report.unchanged += 1
            else:
                changed += 1
        if changed:
            report.warnings.append(f"{why}: {changed} session file(s) changed since it was written are not counted; "
                                   "the figures are the index's as it was")

    def _update_locked(self, entries: list[SourceEntry], refresh: bool, report: IndexReport) -> None:
        manifest = self.manifest()
        if manifest.valid:
            self.sweep(manifest)  # what a writer stopped midway left
        elif manifest.problem:
            report.warnings.append(manifest.problem)
        prices = self.prices()
        version = (litellm_version() if prices is not None else "") + f"+rows{ROWS_VERSION}"
        if not manifest.valid or manifest.prices != version:  # (and rows of another ROWS_VERSION: read again)
            refresh = True  # another price table: price everything again; no manifest: start again
        # a refresh reads every session file again over the index it had: a file that cannot be read now (a
        # database locked, a file gone or damaged since) keeps the rows it had, never 0 calls; only with no
        # valid manifest does it start from nothing
        fresh = not manifest.valid
        if refresh:
            self._followed.clear()
        failed_before, warned_before = len(report.failed), len(report.warnings)
        broken = {} if fresh else self.sized_wrong(manifest)  # truncated, emptied, gone: found at once
        for attempt in range(2):
            if fresh:
                base = Manifest(True, manifest.generation, prices=version)
            else:
                base = manifest.copy()
                if refresh:
                    base.files = {path: {**known, "stamp": None} if isinstance(known, dict) else known
                                  for path, known in base.files.items()}
            if broken:
                base = self.without(base, broken, report.warnings)
            try:
                self._pass(base, entries, refresh or bool(broken) or not manifest.valid, prices, version, report)
                return
            except IndexReadOnly:
                raise
            except _written_errors() as exc:  # (evaluated only when something is raised: DuckDB imported then)
                if not is_duckdb_error(exc) or attempt:
                    raise UsageIndexError(f"cannot write the usage index in {shown_path(self.root)}: "
                                          f"{printable(exc)}") from None
                more = self.probe(base)  # found when used: what DuckDB could not read
                if not more:
                    raise UsageIndexError(f"cannot write the usage index in {shown_path(self.root)}: "
                                          f"{printable(exc)}") from None
                broken.update(more)
                del report.failed[failed_before:]
                del report.warnings[warned_before:]
                report.read = report.unchanged = report.calls = report.tool_results = report.bad_values = 0

    def _pass(self, base: Manifest, entries: list[SourceEntry], rewrite: bool, prices: PriceTable | None,
              version: str, report: IndexReport) -> None:
        """Read the new and changed session files of ``entries`` and write what changed over ``base`` (all of it
        with ``rewrite``), then switch to the new manifest. Files new to the index are read in worker processes
        when there are many (:meth:`_spread`)."""
        known = base.files
        changed: dict[str, FileRows] = {}
        old_days: set[str] = set()
        todo: list[tuple[SourceEntry, list[Any], Any]] = []
        for entry in entries:
            stamp = _stamp(entry)
            if stamp is None:
                report.failed.append((shown_path(entry.path), "the file is gone"))
                continue
            old = known.get(entry.path)
            if isinstance(old, dict) and old.get("stamp") == stamp:
                report.unchanged += 1
                _said_damaged(report, entry.path, old.get("damaged"))
                continue
            todo.append((entry, stamp, old))
        early = {e.path: self._early.pop(e.path)[1] for e, stamp, _ in todo
                 if e.path in self._early and self._early[e.path][0] == stamp}
        self._early.clear()
        reading = [t for t in todo if t[0].path not in early]  # (the others, the scan's workers read)
        told = self._counted({e.path: s[0] if isinstance(s[0], int) else 0 for e, s, _ in reading})
        farmed = self._spread(reading, prices, told)
        for entry, stamp, old in todo:
            fid = file_id(entry.path)
            try:
                done = (early[entry.path] if entry.path in early else
                        next(farmed[entry.path]).result() if entry.path in farmed else None)
                if done is not None:  # read whole in a worker, as read_source reads it
                    rows, damaged_said, waiting = done[0], done[1], False
                else:
                    try:
                        session, one_hour, waiting = self._read(entry, grew=isinstance(old, dict))
                    finally:
                        if told is not None:
                            told(entry.path)
                    rows = rows_of(entry, session, prices, fid, one_hour)
                    damaged_said = bad_said(session)
                days = sorted({r["day"] for r in rows.calls} | {r["day"] for r in rows.tool_results})
            except FILE_ERRORS as exc:  # this file only: said, the others go on
                self._followed.pop(entry.path, None)
                report.failed.append((shown_path(entry.path), _reason(exc)))
                continue
            changed[fid] = rows
            if isinstance(old, dict):
                old_days.update(str(d) for d in old.get("days") or ())
            # a read that is not final (a last line still being written) is done again next time
            known[entry.path] = {"stamp": None if waiting else stamp, "file_id": fid, "days": days,
                                 "session": rows.session}
            if damaged_said is not None:
                known[entry.path]["damaged"] = damaged_said
                _said_damaged(report, entry.path, known[entry.path]["damaged"])
            report.read += 1
            report.calls += len(rows.calls)
            report.tool_results += len(rows.tool_results)
        if not (changed or rewrite or not base.rollups_current() or not self.manifest_path.exists()):
            return
        gc.freeze()  # the rows read stay until written: the collector need not walk them at every pass meanwhile
        try:
            report.days_rewritten, bad = self.write_rows(base, changed, old_days, version,
                                                         all_sessions="sessions" not in base.single)
        finally:
            gc.unfreeze()
        report.bad_values += bad

    def _counted(self, sizes: Mapping[Any, int]) -> Callable[[Any], None] | None:
        """The ``done`` of a step reading the files of ``sizes`` (each file's key: its size; :class:`_Progress`), when
        the update is told progress and the step reads something; else None."""
        if self._progress is None or not sizes:
            return None
        return _Progress(self._progress, sizes).done

    def _summaries(self, pending: list[tuple[Agent, Path, list[int], int]]) -> Iterator[Future[SourceEntry]]:
        """The summaries of the files the sources scan has none of (``pending``: agent, path, stamp, place), in their
        order. Those new to the index in an incremental format and not changed in the last :data:`LIVE_SECONDS` are
        read whole in worker processes (when there are enough of them: :func:`engine.sources.spread.workers_for`)
        for their summary and their rows in one pass (:func:`engine.usage.rows.summary_and_rows`): the rows wait in
        :attr:`_early` for :meth:`_pass`. The others have the scan's light pass, here."""
        from engine.sources.discovery import light_summaries
        from engine.sources.spread import spread, workers_for

        known = self.manifest().files
        live = time.time_ns() - (0 if self._one_shot else LIVE_SECONDS * 10**9)
        far = [i for i, (agent, path, stamp, _) in enumerate(pending)
               if agent in INCREMENTAL and agent in COUNTED and stamp[1] < live and str(path) not in known
               and str(path) not in self._followed]
        if not workers_for(len(far), sum(pending[i][2][0] for i in far)):
            return light_summaries(pending)
        sizes = [pending[i][2][0] for i in far]
        told = self._counted(dict(enumerate(sizes)))  # (by the index of each in what is spread)
        futures = spread(summary_and_rows, [(pending[i][0], str(pending[i][1])) for i in far], sizes,
                         initializer=worker_start, initargs=(self.prices(),), done=told)
        import_soon()  # (the workers are started: DuckDB and NumPy imported while they read)
        return self._taken(pending, set(far), futures)

    def _taken(self, pending: list[tuple[Agent, Path, list[int], int]], far: set[int],
               futures: Iterator[Future[tuple[SourceEntry, WorkerRows]]]) -> Iterator[Future[SourceEntry]]:
        from engine.sources.discovery import light_summaries
        from engine.sources.spread import run_here

        here = light_summaries([p for i, p in enumerate(pending) if i not in far])
        for i, (_, path, stamp, _) in enumerate(pending):
            if i not in far:
                yield next(here)
                continue
            done = next(futures)
            if done.exception() is not None:  # raised where the scan takes it: that file's problem, said
                yield cast(Future[SourceEntry], done)
                continue
            entry, rows = done.result()
            self._early[str(path)] = (stamp, rows)
            yield run_here(_same, entry)

    def _spread(self, todo: list[tuple[SourceEntry, list[Any], Any]], prices: PriceTable | None,
                told: Callable[[str], None] | None = None) -> dict[str, Iterator[Future[WorkerRows]]]:
        """Start reading, in worker processes (:func:`engine.sources.spread.spread`), the files of ``todo`` new to
        the index in a format read by an incremental reader: path -> an iterator whose next item is that file's
        future (:func:`rows_of_file`). The :data:`FOLLOWED` most recently changed of those an agent may be writing
        (:data:`LIVE_SECONDS`) are left to :meth:`_read` (their readers kept), as are files read before. ``told``:
        told each file's path once it is read."""
        from engine.sources.spread import spread, workers_for

        new = [(e, s) for e, s, old in todo if e.agent in INCREMENTAL and "#" not in e.path
               and not isinstance(old, dict) and e.path not in self._followed and isinstance(s[0], int)]
        if not workers_for(len(new), sum(s[0] for _, s in new)):
            return {}
        live = [] if self._one_shot else [(s[1], e.path) for e, s in new if _changed_within(Path(e.path), LIVE_SECONDS)]
        kept = {p for _, p in sorted(live)[-FOLLOWED:]}
        new = [(e, s) for e, s in new if e.path not in kept]
        futures = spread(rows_of_file, [(e, file_id(e.path)) for e, _ in new], [s[0] for _, s in new],
                         initializer=worker_start, initargs=(prices,),
                         done=None if told is None else (lambda i: told(new[i][0].path)))
        return {e.path: futures for e, _ in new}

    # ------------------------------------------------------------------ query

    def read(self, fn: Callable[[Any], T]) -> T:
        """``fn(connection)`` on the index as its manifest names it (see :meth:`connect`). A query that fails because
        a file went (another process switched the manifest after this one read it) runs again on the new
        manifest; one that fails on a damaged file has the index rebuilt without it (said in :attr:`notices`)
        and runs again. Else UsageIndexError naming the index and what was wrong (never DuckDB's traceback)."""
        last: Exception | str | None = None
        for _attempt in range(3):
            m = self.manifest(whole=False)
            wrong = self.sized_wrong(m)  # gone, emptied, truncated, replaced: a stat per file
            if wrong:
                last = "; ".join(f"{shown_path(self.root / n)}: {why}" for n, why in wrong.items())
                if self.manifest(whole=False).token != m.token or self.repair(m):
                    continue
                break
            try:
                con = cursor(self.root, m)
                try:
                    return fn(con)
                finally:
                    con.close()
            except duckdb_errors() as exc:
                last = exc
            now = self.manifest(whole=False)
            if now.token != m.token:
                continue  # lost a race with a writer: the new manifest
            if not m.valid or not self.repair(m):
                break
        raise UsageIndexError(f"cannot query the usage index in {shown_path(self.root)}: "
                              f"{printable(str(last).splitlines()[0] if last else '')}")

    def connect(self) -> Any:
        """A DuckDB connection with the views ``calls``, ``tool_results``, ``sessions``, ``call_rollup``,
        ``tool_rollup`` and ``session_rollup`` over exactly the files the manifest names (empty tables when it
        names none; rollups of another version built in memory): a cursor of an in-memory database kept per
        manifest for the process, whose views read the files when queried. Close it when done. A query on it may
        fail when another process switched the manifest meanwhile: :meth:`read` tries again."""
        return cursor(self.root, self.manifest(whole=False))

    def query(self, by: str = "day", since: date | None = None) -> list[dict[str, Any]]:
        """The figures per group (see :func:`engine.usage.queries.summarize`)."""
        if by not in queries.GROUPS:
            raise ValueError(f"cannot group by {by!r}: one of {', '.join(queries.GROUPS)}")
        return self.read(lambda con: queries.summarize(con, by, since))

    def totals(self, since: date | None = None) -> dict[str, Any]:
        """The figures of every call since ``since`` (see :func:`engine.usage.queries.totals`)."""
        return self.read(lambda con: queries.totals(con, since))
