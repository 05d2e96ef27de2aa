"""Read-only views of other agents' sessions: the private folders they are imported into, and the
bookkeeping that makes a live refresh incremental. No asyncio, no events: the functions here run in
worker threads (:mod:`engine.workbench.sources` calls them through ``asyncio.to_thread``).

A view folder is ``<views_root()>/<pid>-<hex>`` (memory-backed ``/dev/shm/ctxbench-<uid>-<key>/views``
where the system has it, else ``data_dir()/views``): the source file imported by
:func:`engine.ingest.import_source` (its subagents inside, under ``subagents/``). It belongs to the
process named in it; folders of processes that are gone are removed by :func:`remove_stale_views`.

Message ids: a reader gives each read's messages ids made of a random 24-hex prefix and a counter
(:class:`engine.sources.model.IdMaker`). :func:`import_view` replaces that prefix in the folder's own
files by the view's fixed prefix, so the same message (the same line of an append-only file) keeps its
id from one read to the next, and the window can be told "these are new" rather than "here is
everything again".

A view of an agent's own session whose calls a recording proxy's capture holds (``<data dir>/captures``) takes
their exact system prompt and tool definitions from it (:mod:`engine.sources.join`), at the open and as it grows.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capture.files import captures_dir
from engine.context.window import ModelInfo
from engine.model.messages import Message
from engine.sources.detect import detect_format
from engine.sources.follow import FOLLOWED, POLLED, DatabaseNotices, Tail
from engine.sources.formats import RewrittenReader, agent_format, appended_reader, display_name, polled_reader
from engine.sources.join import CaptureJoin, written
from engine.sources.model import IdMaker, SourceChanges, SourceError, SourceSession, capped_lines, open_regular
from engine.store.config import Settings, data_dir
from engine.store.session_load import reprefix_ids
from engine.store.staging import IMPORT_PREFIX, collection_paused, remove_if_stale
from engine.workbench.rows import ViewSource

VIEWS_DIR = "views"
SHM = "/dev/shm"  # memory-backed on Linux
LIVE_SECONDS = 120.0  # a source file modified this recently is marked live


def found_sessions_text(counts: Mapping[str, int]) -> str:
    """The first-run pointer to Sources: ``"Found 8 Claude Code sessions and 3 Codex sessions on this machine.
    …"`` (largest first), "" when no other agent's session was found."""
    parts = sorted(((n, display_name(agent)) for agent, n in counts.items() if n > 0),
                   key=lambda p: (-p[0], p[1]))
    bits = [f"{n:,} {name} session{'s' if n != 1 else ''}" for n, name in parts]
    if not bits:
        return ""
    found = ", ".join(bits[:-1]) + " and " + bits[-1] if len(bits) > 1 else bits[0]
    return (f"Found {found} on this machine. Open any of them read-only — its context, calls, cost and "
            f"compactions — from the Sources tab.")


@dataclass
class SourceView:
    """The read-only view open in the service."""

    root: Path | None  # the private folder removed when the view is left (None: inside a real session)
    folder: Path  # the session folder open now (``root``, or a subagent folder)
    source: str  # the agent's file it shows ("" when unknown)
    format: str
    prefix: str  # the message-id prefix of this view
    tail: Tail | None = None  # set while the file is followed
    live_source: LiveSource | None = None  # the followed file's reader and the folder kept up to date
    parent: dict[str, Any] = field(default_factory=dict)  # {"kind": "source", "path"} | {"kind": "session", "id"}
    subagent: str = ""  # the subagent's rel path when this is one
    live: bool = False  # written in the last LIVE_SECONDS, as last told
    title: str = ""  # as last shown
    imported: Any = None  # the ImportFacts last shown (SessionView.imported)

    def describe(self) -> ViewSource:
        """The ``SessionView.source``."""
        title = self.parent.get("title") if self.parent else None
        return ViewSource(path=self.source, format=self.format, agent=display_name(self.format), live=self.live,
                          following=self.tail is not None, subagent=self.subagent,
                          parent=None if not self.parent else str(title or ""))


LIVE_FORMATS = FOLLOWED  # read incrementally while followed in a view (what a Follower follows)


def _reader(fmt: str, path: Path, prefix: str) -> Any:
    """The format's incremental reader (a database's: polled, read-only, busy retried), its message ids under the
    view's ``prefix``."""
    if agent_format(fmt).growth == "polled":
        return polled_reader(fmt, path)
    reader = appended_reader(fmt, path)
    reader.session.make_id = IdMaker(prefix)
    return reader


class LiveSource:
    """A followed file seen through its format's incremental reader (:mod:`engine.sources`): the file is
    read once, when the view opens; then :meth:`poll` reads only what was appended (a :class:`Tail`: a
    partial last line waits; truncated, replaced or rewritten: read again from the start), feeds it to the
    reader, and works out what changes in the view folder (:class:`engine.ingest.LiveImport`). Runs in a
    worker thread; :meth:`engine.ingest.LiveImport.apply` writes a plan on the loop."""

    def __init__(self, path: Path, fmt: str, prefix: str, settings: Settings, model_info: ModelInfo | None) -> None:
        self.path, self.format, self.prefix = Path(path), fmt, prefix
        self.settings, self.model_info = settings.replace(context_window=None), model_info
        self.tail = Tail(source_file(self.path))
        self.reader = _reader(fmt, self.path, prefix)
        self.importer: Any = None  # engine.ingest.LiveImport once written
        # a recording proxy's capture of the same calls gives their exact system prompt and tools (engine.sources.join)
        self.join: CaptureJoin | None = CaptureJoin(captures_dir())
        self._notices = DatabaseNotices()

    def notice(self) -> str | None:
        """Why the source cannot be read now, said once per problem (the file deleted or no regular file now; an
        OpenCode database removed, damaged or locked for long), else None: the view keeps what it last read."""
        if self.format in POLLED:
            event = self._notices.notice(self.reader)
            return event.reason if event is not None else None
        return self.tail.notice()

    @property
    def session(self) -> SourceSession:
        session: SourceSession = self.reader.session
        return session

    def _read(self) -> tuple[list[SourceChanges], bool]:
        """Feed the reader everything appended since the last read: (the changes, the file was reset)."""
        if self.format in POLLED:  # a database: its rows changed since the last poll
            changes = self.reader.poll()
            return [changes], changes.reset
        out: list[SourceChanges] = []
        reset = False
        more = True
        while more:
            lines, why, more = self.tail.read()
            if why is not None and isinstance(self.reader, RewrittenReader):
                self.reader.restart()  # the file rewritten whole: the reader tells what the new version adds
            elif why is not None:
                reset = True
                out.clear()
                self.reader = _reader(self.format, self.path, self.prefix)
            if lines:
                out.append(self.reader.feed_lines([line + b"\n" for line in lines]))
        return out, reset or (isinstance(self.reader, RewrittenReader) and any(c.reset for c in out))

    def _ready(self) -> SourceSession:
        if hasattr(self.reader, "read_beside"):
            self.reader.read_beside()  # persisted tool results, subagent files
        self._join()
        return self.session

    def _join(self) -> None:
        if self.join is not None:
            self.join.apply(self.session, written(self.path))

    def open(self, folder: Path) -> str:
        """Read the whole file and write the view into ``folder`` (new); the format. A bulk read, as an import: the
        collector is paused meanwhile (:func:`engine.store.staging.collection_paused`)."""
        from engine.ingest import LiveImport

        with collection_paused():
            if hasattr(self.reader, "settle"):
                self.reader.bulk = True  # the whole file at once: scanned, then built once
            self._read()
            if hasattr(self.reader, "settle"):
                self.reader.settle()
            src = self._ready()
            if not src.messages and not src.calls:
                raise SourceError(f"{self.path.name}: no message or provider call could be read as {self.format} "
                                  f"({len(src.skipped)} line(s) skipped)")
            self.importer = LiveImport(src, folder, self.settings, _estimator(), self.model_info)
        return self.format

    def prime(self, session: Any) -> None:
        """``session`` was loaded from the folder :meth:`open` wrote (nothing written since): its records are the
        ones written, not parsed again from events.jsonl (once)."""
        written = getattr(self.importer, "written", None)
        if written is not None:
            session.prime_records(written)
            self.importer.written = None

    def poll(self) -> Any:
        """Read what was appended: the :class:`engine.ingest.LivePlan` to apply (empty when nothing came),
        or None when the view folder must be written again (:meth:`rewrite`)."""
        from engine.ingest import LivePlan

        changes, reset = self._read()
        if reset:
            return None
        if changes:
            self._join()  # new calls: found in the capture too (written there first)
        self.importer.follow(self.session)  # a polled reader builds its session anew
        if not changes:
            return LivePlan()
        merged = SourceChanges(
            messages_from=min(c.messages_from for c in changes), calls_from=changes[0].calls_from,
            calls_updated=sorted({i for c in changes for i in c.calls_updated}),
            compactions_from=min(c.compactions_from for c in changes), reset=any(c.reset for c in changes))
        return self.importer.plan(merged)

    def rewrite(self, folder: Path) -> None:
        """Write the view into ``folder`` (new) from the reader's session in memory (not the file)."""
        self.importer.src = self._ready()
        self.importer.rewrite(folder)


PROGRESSIVE_BYTES = 16 << 20  # a Claude Code file larger than this shows its current context first
_BOUNDARY = b'"subtype":"compact_boundary"'
_TAIL_BYTES = 4 << 20  # without a compaction in the file: the first screen shows its last 4 MB


def tail_offset(path: Path, block: int = 4 << 20) -> int:
    """Where the file's current context begins: the start of its last ``compact_boundary`` line (searched
    from the end, within the last ``block`` bytes), else of a line about :data:`_TAIL_BYTES` before the end. A
    compaction further back does not make the first screen larger: a long context since it (thousands of
    calls) would be read twice, the first screen as long as the whole read."""
    with open_regular(path) as fh:  # a regular file only (never a FIFO or a device)
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - block)
        fh.seek(start)
        data = fh.read(size - start)
        at = data.rfind(_BOUNDARY)
        if at >= 0:
            line = data.rfind(b"\n", 0, at)
            if line >= 0 or start == 0:
                return int(start + line + 1)
        fh.seek(max(0, size - _TAIL_BYTES))
        data = fh.read(min(size, _TAIL_BYTES))
    return max(0, size - _TAIL_BYTES) + data.find(b"\n") + 1 if size > _TAIL_BYTES else 0


def preview_view(path: Path, folder: Path, prefix: str, settings: Settings, model_info: ModelInfo | None) -> bool:
    """The first screen of a large Claude Code file, written into ``folder`` (new): its context since the last
    compaction (the summary and what came after, with the calls made since), read from the end of the file
    without reading the rest; the whole file is read next. False when there is nothing to show."""
    from engine.ingest import LiveImport
    from engine.sources.claude_code import ClaudeCodeReader

    start = tail_offset(path)
    reader = ClaudeCodeReader(path, bulk=True)
    reader.session.make_id = IdMaker(prefix)
    with open_regular(path) as fh:
        fh.seek(start)
        reader.feed_lines(line for line in capped_lines(fh, name=path.name) if line.endswith(b"\n"))
    src = reader.finish(subagents=False)
    if not src.messages and not src.calls:
        return False
    src.notes.append("the first screen: the context since the last compaction (the whole file is being read)")
    LiveImport(src, folder, settings.replace(context_window=None), _estimator(), model_info)
    return True


def _estimator() -> Any:
    from engine.context.tokens import HeuristicEstimator

    return HeuristicEstimator()


def view_title(messages: list[Message], fallback: str, limit: int = 60) -> str:
    """The first prompt of a person (one line, cut at ``limit``; not text the agent injected, an
    ``attachment``), else ``fallback``."""
    for msg in messages:
        content = msg.get("content")
        if msg.get("role") == "user" and isinstance(content, str) and content.strip() \
                and not msg.get("attachment") and not content.lstrip().startswith("<"):
            flat = " ".join(content.split())
            return flat if len(flat) <= limit else flat[: limit - 1] + "…"
    return fallback


def views_root() -> Path:
    """Where view folders go. A followed view's folder is written again on every refresh, so when the
    system has a memory-backed folder (``/dev/shm``) it goes there — in a folder only this user can
    read, one per data dir — and no disk is worn by following all day; else under the data dir."""
    base = data_dir() / VIEWS_DIR
    shm = Path(SHM)
    getuid = getattr(os, "getuid", None)
    if getuid is None or not shm.is_dir() or not os.access(shm, os.W_OK | os.X_OK):
        return base
    key = hashlib.sha256(str(base).encode()).hexdigest()[:12]
    private = shm / f"ctxbench-{getuid()}-{key}"
    try:
        private.mkdir(mode=0o700, exist_ok=True)
        st = private.stat()
    except OSError:
        return base
    if st.st_uid != getuid() or st.st_mode & 0o077:
        return base  # not ours, or readable by others: never put a session there
    return private / VIEWS_DIR


def source_file(path: str | Path) -> Path:
    """The file a source lives in: ``path`` itself, or the database of an OpenCode ``<db>#<session>``."""
    text = str(path)
    if "#" in text and not Path(text).exists():
        return Path(text.split("#", 1)[0])
    return Path(text)


def is_live(path: str | Path, now: float | None = None) -> bool:
    """Modified in the last :data:`LIVE_SECONDS` (an agent is writing it; a database: its own file or its
    write-ahead log)."""
    if not path:
        return False
    file = source_file(path)
    try:
        mtime = max(p.stat().st_mtime for p in (file, file.with_name(file.name + "-wal")) if p.exists())
    except (OSError, ValueError):
        return False
    return (time.time() if now is None else now) - mtime < LIVE_SECONDS


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def remove_stale_views(root: Path) -> int:
    """Remove the view folders of processes that are gone (a crash left them); how many."""
    removed = 0
    try:
        children = list(root.iterdir())
    except OSError:
        return 0
    for child in children:
        if child.name.startswith(IMPORT_PREFIX):  # an import building a view: removed only when no process holds it
            removed += remove_if_stale(child)
            continue
        head = child.name.split("-", 1)[0]
        if head.isdigit() and _pid_alive(int(head)):
            continue
        shutil.rmtree(child, ignore_errors=True)
        removed += 1
    prune(root)
    return removed


def new_view_folder(root: Path) -> Path:
    return root / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


def import_view(path: Path, folder: Path, prefix: str, settings: Settings,
                model_info: ModelInfo | None = None) -> str:
    """Import ``path`` into ``folder`` (new) with message ids under ``prefix`` (a file that is not followed);
    its format. ``model_info`` looks up the window of the model that made it (as File → Open does)."""
    from engine.ingest import import_source

    report = import_source(path, session_dir=folder, settings=settings.replace(context_window=None),
                           model_info=model_info)
    reprefix_ids(folder, prefix)
    return str(report.format)


def swap_folders(stable: Path, fresh: Path) -> Path:
    """Put ``fresh`` at ``stable``'s path; the old folder's new path (to remove)."""
    old = stable.with_name(stable.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    os.rename(stable, old)
    os.rename(fresh, stable)
    return old


def new_prefix() -> str:
    return uuid.uuid4().hex[:24]


def format_of(path: Path) -> str:
    """The format of the source at ``path`` (SourceError when none fits)."""
    return str(detect_format(path))


















def remove_folder(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def remove_view(folder: Path | None) -> None:
    """Remove a view's folder, and the views folder (and its private parent in /dev/shm) once empty."""
    if folder is None:
        return
    remove_folder(folder)
    prune(folder.parent)


def prune(root: Path) -> None:
    """Remove the views folder ``root`` when it is empty, with its private parent in /dev/shm."""
    for empty in (root, root.parent) if root.parent.parent == Path(SHM) else ():
        try:
            empty.rmdir()
        except OSError:
            return  # not empty: another view of this data dir is open


def subagent_file(session_folder: Path, rel: str) -> str:
    """The agent's own file of the subagent at ``rel`` (from the parent's import record), or ""."""
    try:
        meta = json.loads((session_folder / "session.json").read_bytes())
    except (OSError, ValueError):
        return ""
    for sub in (meta.get("import") or {}).get("subagents") or []:
        if isinstance(sub, dict) and sub.get("session") == rel:
            return str(sub.get("file") or "")
    return ""


__all__ = [
    "LIVE_FORMATS",
    "LIVE_SECONDS",
    "LiveSource",
    "SourceView",
    "format_of",
    "found_sessions_text",
    "import_view",
    "is_live",
    "new_prefix",
    "new_view_folder",
    "prune",
    "remove_folder",
    "remove_stale_views",
    "remove_view",
    "subagent_file",
    "swap_folders",
    "view_title",
    "views_root",
]
