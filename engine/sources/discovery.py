"""The agent sessions on this machine, for ``ctxbench sources``.

Where each agent keeps them:

- Claude Code: ``~/.claude/projects/<project>/<session>.jsonl``, ``~/.config/claude/projects/``, and
  the ``projects`` folder of every folder named in ``$CLAUDE_CONFIG_DIR`` (comma-separated);
- Codex: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` (``~/.codex/sessions`` by default); a subagent's
  rollout (a ``spawn_agent`` thread: its ``session_meta`` names its parent) is counted with its parent when the
  parent is listed (``subagents``; the parent's import reads it), else listed on its own;
- Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (``$GEMINI_CLI_HOME`` instead of the home
  when set);
- Pi: ``~/.pi/agent/sessions/--<cwd>--/*.jsonl`` (``$PI_CODING_AGENT_DIR`` instead of ``~/.pi/agent`` when
  set);
- Copilot CLI: ``~/.copilot/session-state/<session uuid>/events.jsonl`` (``$COPILOT_HOME`` instead of ``~/.copilot``
  when set), titled by ``workspace.yaml``'s name, else the first prompt;
- Cline: ``~/.cline/data/sessions/<id>/<id>.messages.json`` (as Cline finds it: ``$CLINE_SESSION_DATA_DIR``, else
  ``$CLINE_DATA_DIR/sessions``, else ``$CLINE_DIR/data/sessions``);
- OpenCode: the SQLite database ``${XDG_DATA_HOME:-~/.local/share}/opencode/opencode*.db``: one row per
  top-level session (its path ``<db>#<session id>``); a child session (a ``task`` subagent, ``parent_id``) is
  counted with its parent (``subagents``, and its cost in the parent's);
- Kilo CLI: the same, in ``${XDG_DATA_HOME:-~/.local/share}/kilo/kilo*.db`` (OpenCode's schema; a cost of 0 is
  Kilo's for a model it has no price for: unknown);
- recordings of ``ctxbench record`` / ``ctxbench proxy`` (:mod:`engine.capture`):
  ``<data dir>/captures/capture-*.jsonl`` (a rolled-over capture is listed once, by its first part; its summary
  reads every part), titled by the first prompt the recorded agent sent;
- any folder named in the ``source_dirs`` setting (``os.pathsep``-separated), searched for all of them.

Each file is summarised by a light pass (only the lines that carry usage are parsed): started,
last activity, provider calls, last prompt tokens, window and how full it is, and — for Claude Code
files that have ``cost-state`` lines (2.1.3xx) — the agent's own cost in USD (the last line's
``totalCostUSD``; OpenCode: the session's ``cost``). The summaries are
kept in ``sources-index.json`` in the data dir with each file's size and mtime, so a second scan
re-reads only the files that changed. Files are only read, never locked or moved.

An OpenCode database's key is the size and mtime of the database and of its ``-wal`` file (where OpenCode's
writes land first); when it changed, each session is read again only if its own rows changed (the session's
``time_updated`` and its messages' count and newest ``time_updated``, its children's too). A database that
stays locked by another process (1 s in all), or cannot be read (damaged, a table or column missing, not a
database), is a problem of the scan with the reason; its sessions are shown as the index had them (said so)
and it is read again at the next scan. A session that cannot be summarised is a problem of its own; the
others are listed all the same.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from engine.model.text import printable
from engine.sources import formats, places, session_summary
from engine.sources.entry import Agent, SourceEntry
from engine.sources.lazy import LazyModule
from engine.sources.model import LINE_ERRORS, SourceError, SourceFormat, capped_lines, open_regular, shown_path
from engine.sources.opencode_summary import opencode_stamp, session_path, summarize_opencode
from engine.sources.session_summary import SCAN_BLOCK, _loads, summarize
from engine.store.config import Settings, data_dir
from engine.store.fsutil import atomic_write_bytes

__all__ = ["SCAN_BLOCK", "Agent", "ScanProblem", "SourceEntry", "format_table", "index_path", "opencode_stamp",
           "scan_sources", "source_roots", "summarize", "summarize_opencode"]

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from engine.sources import sqlite_read
else:  # imported when a database is read (engine.sources.lazy)
    sqlite_read = LazyModule("sqlite_read")

INDEX_FILE = "sources-index.json"
INDEX_VERSION = 7  # 2: entries carry the first prompt (title); 3: the agent's own cost; 4: no interruption title;
# 5: Codex 0.1xx titled by its first user message item, its project from world_state / turn_context; 6: a Claude Code
# line that only mentions "cost-state" (a prompt, an answer) is read as any other line; 7: a Codex subagent's parent
# (parent_id)
# what a session file's summary raises when the file cannot be read or holds what its reader did not foresee
READ_ERRORS: tuple[type[BaseException], ...] = (SourceError, OSError, *LINE_ERRORS)
LIVE_SECONDS = 120  # a file changed this recently may be growing: a scan spread over processes reads it here


@dataclass(frozen=True)
class ScanProblem:
    """A session file (or database) the scan could not read: skipped, never stopping the others. ``path`` as
    the scan found it; ``reason`` says what was wrong, for a person."""

    agent: str
    path: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.path}: {self.reason}"


# --------------------------------------------------------------------------- where


def source_roots(settings: Settings | None = None, env: Mapping[str, str] | None = None,
                 home: Path | None = None) -> list[tuple[Agent | None, Path]]:
    """(agent, folder) pairs to search, each listed format's folders as its :class:`~engine.sources.places.Place`
    finds them, then the folders of the ``source_dirs`` setting (``None`` as the agent: any format, found by its
    files)."""
    env, home = places.environment(env, home)
    roots: list[tuple[Agent | None, Path]] = [
        (cast(Agent, spec.name), folder) for spec in formats.FORMATS.values() if spec.place
        for folder in spec.place.roots(env, home)]
    for item in (settings.source_dirs if settings else "").split(os.pathsep):
        if item.strip():
            roots.append((None, Path(item.strip()).expanduser()))
    seen: set[Path] = set()
    out = []
    for agent, folder in roots:
        key = folder.resolve() if folder.exists() else folder
        if key not in seen:
            seen.add(key)
            out.append((agent, folder))
    return out


def _files(agent: Agent | None, folder: Path,
           problems: list[ScanProblem] | None = None) -> Iterable[tuple[Agent, Path]]:
    """The session files under ``folder`` (the walk never follows a linked folder, so a link loop ends): an agent's
    folder by its format's pattern; a folder of the ``source_dirs`` setting by every format's ``anywhere`` glob, then
    its ``.jsonl`` files by their first line. A file whose format must be read from its first lines and that cannot
    be read (a FIFO, a device) is added to ``problems``."""
    if not folder.is_dir():
        return
    if agent is not None:
        place = formats.agent_format(agent).place
        if place is not None:
            for path in _walk(folder.glob(place.pattern), folder, problems):
                if place.keep is None or place.keep(path):
                    yield agent, path
        return
    for spec in formats.FORMATS.values():
        if spec.place and spec.place.anywhere:
            for path in _walk(folder.glob(spec.place.anywhere), folder, problems):
                if spec.place.is_source is None or spec.place.is_source(path):
                    yield cast(Agent, spec.name), path
    by_first_line = {spec.name: spec.place for spec in formats.FORMATS.values()
                     if spec.place and spec.place.by_first_line}
    for path in _walk(folder.glob("**/*.jsonl"), folder, problems):
        if not places.not_a_subagent_file(path):
            continue
        try:
            kind = _jsonl_agent(path)
        except SourceError as exc:
            if problems is not None:
                problems.append(ScanProblem("unknown", str(path), _reason(exc, path)))
            continue
        place = by_first_line.get(cast(SourceFormat, kind))
        if place is not None and (place.keep is None or place.keep(path)):
            yield cast(Agent, kind), path


def _walk(paths: Iterable[Path], folder: Path, problems: list[ScanProblem] | None) -> Iterator[Path]:
    """``paths`` (a glob of ``folder``) until the walk fails (a folder that vanished or cannot be listed): what it
    found until then, the failure added to ``problems``."""
    try:
        yield from paths
    except OSError as exc:
        if problems is not None:
            problems.append(ScanProblem("unknown", str(folder), f"cannot list: {exc.strerror or exc}"))


def _jsonl_agent(path: Path) -> str | None:
    """The format of a JSONL file's first JSON object line (``claude-code``, ``gemini-cli``, …), or None (also
    when it cannot be opened); SourceError when it is no regular file (a FIFO, a device: never read)."""
    from engine.sources.detect import _jsonl_kind

    try:
        with open_regular(path) as fh:
            for n, raw in enumerate(capped_lines(fh, name=path.name)):
                if n >= 20:
                    return None
                obj = _loads(raw)
                if obj:
                    return _jsonl_kind(obj)
    except OSError:
        return None
    return None


# --------------------------------------------------------------------------- OpenCode


def _scan_opencode(db: Path, old: Any, refresh: bool, problems: list[ScanProblem], index: Path | None,
                   agent: Agent) -> tuple[dict[str, Any] | None, list[SourceEntry], bool]:
    """(the index record, the entries, whether anything was read) of one database. A database that cannot be
    read now — locked by another process (after :data:`engine.sources.opencode.LOCK_WAIT`), damaged, not
    OpenCode's — is added to ``problems`` with the reason, and its sessions are shown as the index had them
    (also under ``refresh``, from ``index``), said so; it is read again at the next scan. A session that could
    not be summarised is a problem of its own (``<db>#<session id>``)."""
    stamp = opencode_stamp(db)
    old = _opencode_record(old)
    if stamp is None:
        return None, [], False
    if old is not None and old.get("stamp") == stamp and not refresh:
        record, read = old, False
    else:
        try:
            sessions = summarize_opencode(db, None if refresh or old is None else old["sessions"],
                                          cast(Any, agent))  # a polled format: OpenCode's schema
        except (SourceError, ValueError, TypeError, KeyError, RecursionError, OSError, sqlite3.Error) as exc:
            if not isinstance(exc, SourceError):  # not foreseen by the reader: still this database's alone
                exc = SourceError(f"{shown_path(db)}: cannot be read ({type(exc).__name__}: {exc})")
            if old is None and refresh and index is not None:
                old = _opencode_record(_load_index(index).get(str(db)))
            shown = _entries_of(old)
            reason = str(exc).removeprefix(f"{shown_path(db)}: ")
            if isinstance(exc, sqlite_read.DatabaseBusy):
                reason = "locked by another process"
            reason += "; shown as of the last read" if shown else "; not read"
            problems.append(ScanProblem(agent, str(db), reason))
            return old, shown, False  # tried again at the next scan
        record, read = {"stamp": stamp, "sessions": sessions}, True
    for sid, item in record["sessions"].items():
        if isinstance(item, dict) and isinstance(item.get("problem"), str):
            shown_as = "; shown as of the last read" if isinstance(item.get("entry"), dict) else "; not listed"
            problems.append(ScanProblem(agent, str(session_path(db, sid)), item["problem"] + shown_as))
    return record, _entries_of(record), read


def _opencode_record(record: Any) -> dict[str, Any] | None:
    """An index record of a database (``{"stamp": …, "sessions": {…}}``), or None when ``record`` is none."""
    return record if isinstance(record, dict) and isinstance(record.get("sessions"), dict) else None


def _entries_of(record: dict[str, Any] | None) -> list[SourceEntry]:
    out = []
    for item in (record or {}).get("sessions", {}).values():
        try:
            out.append(SourceEntry(**item["entry"]))
        except (TypeError, KeyError):
            continue
    return out


# --------------------------------------------------------------------------- index cache


def index_path() -> Path:
    return data_dir() / INDEX_FILE


def _load_index(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION or not isinstance(data.get("files"), dict):
        return {}
    files: dict[str, Any] = data["files"]
    return files


def _index_bytes(data: dict[str, Any]) -> bytes:
    """The index as compact JSON (no fsync: a cache). A path that is not UTF-8 (Python keeps its bytes as lone
    surrogates) is written as ``\\udcff`` escapes, which read back as the same path."""
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _reason(exc: BaseException, path: Path) -> str:
    """What was wrong with ``path``, for a person (its name, which a message may begin with, left out: the
    problem names the path)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot read: {exc.strerror}"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, RecursionError):
        text = "nested too deeply to be read"
    elif not isinstance(exc, SourceError):
        text = f"cannot be read ({type(exc).__name__}: {text[:120]})"
    return text.removeprefix(f"{path.name}: ")


# what summarises the files a scan has no summary of: (agent, path, stamp, place) each -> their summaries, in order
Summaries = Callable[[list[tuple[Agent, Path, list[int], int]]], Iterator[Future[SourceEntry]]]


def scan_sources(settings: Settings | None = None, *, refresh: bool = False, env: Mapping[str, str] | None = None,
                 home: Path | None = None, index: Path | None = None,
                 problems: list[ScanProblem] | None = None, summaries: Summaries | None = None) -> list[SourceEntry]:
    """Every session found, newest first; unchanged files (same size and mtime) come from the index. A file
    that cannot be read is left out and, when ``problems`` is given, added to it with the reason. ``summaries``:
    what summarises the files the index has no summary of (the usage index's, which reads them whole for their
    rows in the same pass), else :func:`light_summaries` (the light pass)."""
    problems = problems if problems is not None else []
    index = index or index_path()
    cached = {} if refresh else _load_index(index)
    files: dict[str, Any] = {}
    entries: list[SourceEntry | None] = []  # None: summarised after the walk (its place kept)
    pending: list[tuple[Agent, Path, list[int], int]] = []  # (kind, path, stamp, place in entries)
    changed = refresh
    for agent, folder in source_roots(settings, env, home):
        for kind, path in _files(agent, folder, problems):
            key = str(path)
            if key in files:
                continue
            if formats.agent_format(kind).growth == "polled":  # a database: its sessions summarised one by one
                record, found, read = _scan_opencode(path, cached.get(key), refresh, problems, index, kind)
                if record is not None:
                    files[key] = record
                changed = changed or read
                entries += found
                continue
            try:
                st = path.stat()
            except OSError as exc:
                if os.path.lexists(path):  # a link to nothing, a folder it may not enter: said (a file gone: not)
                    problems.append(ScanProblem(kind, key, _reason(exc, path)))
                continue
            stamp = [st.st_size, st.st_mtime_ns]
            old = cached.get(key)
            if isinstance(old, dict) and old.get("stamp") == stamp and isinstance(old.get("entry"), dict):
                try:
                    entry = SourceEntry(**old["entry"])
                except TypeError:
                    entry = None
                if entry is not None:
                    files[key] = old
                    entries.append(entry)
                    continue
            files[key] = {}
            pending.append((kind, path, stamp, len(entries)))
            entries.append(None)
    for (kind, path, stamp, place), done in zip(pending, (summaries or light_summaries)(pending), strict=True):
        key = str(path)
        try:
            entry = done.result()
        except READ_ERRORS as exc:  # cannot be read, or of a shape its reader did not foresee: said, the others
            problems.append(ScanProblem(kind, key, _reason(exc, path)))  # still listed
            del files[key]
            continue
        except Exception as exc:  # a reader's boundary (here or in a worker): whatever else one file's summary
            # raises (a bug) is said too, and the others are still listed
            log.warning("summarising %s failed", key, exc_info=True)
            problems.append(ScanProblem(kind, key, _reason(exc, path)))
            del files[key]
            continue
        changed = True
        files[key] = {"stamp": stamp, "entry": entry.to_json()}
        entries[place] = entry
    if changed or set(files) != set(cached):
        try:
            atomic_write_bytes(index, _index_bytes({"version": INDEX_VERSION, "files": files}), durable=False)
        except OSError:
            pass  # a read-only data dir: the next scan reads everything again
    found = _with_subagents_counted(_without_resume_stubs([e for e in entries if e is not None]))
    found.sort(key=lambda e: e.last_activity or e.started, reverse=True)
    return found


def _summary_job(job: tuple[Agent, Path]) -> SourceEntry:
    return summarize(*job)


def light_summaries(pending: list[tuple[Agent, Path, list[int], int]]) -> Iterator[Future[SourceEntry]]:
    """The summaries of the ``pending`` files, in their order: spread over the machine's cores when there are many
    (:func:`engine.sources.spread.spread`), but the ``CLAUDE_SCANS_KEPT`` most recently changed files of those
    changed in the last :data:`LIVE_SECONDS` whose format keeps its light pass (``light_pass_kept``: Claude Code's
    ``_CLAUDE_SCANS`` in :mod:`engine.sources.session_summary`) summarised here, so that it is kept for their growth."""
    from engine.sources.spread import run_here, spread, workers_for

    if not workers_for(len(pending), sum(stamp[0] for _, _, stamp, _ in pending)):
        return (run_here(_summary_job, (kind, path)) for kind, path, _, _ in pending)
    live = time.time_ns() - LIVE_SECONDS * 10**9
    recent = sorted((stamp[1], i) for i, (kind, _, stamp, _) in enumerate(pending)
                    if formats.agent_format(kind).light_pass_kept and stamp[1] >= live)
    here = {i for _, i in recent[-session_summary.CLAUDE_SCANS_KEPT:]}
    far = [i for i in range(len(pending)) if i not in here]
    futures = spread(_summary_job, [pending[i][:2] for i in far], [pending[i][2][0] for i in far])
    done = {i: run_here(_summary_job, pending[i][:2]) for i in sorted(here)}  # while the workers work
    return (done[i] if i in here else next(futures) for i in range(len(pending)))


def _with_subagents_counted(entries: list[SourceEntry]) -> list[SourceEntry]:
    """A subagent's file whose parent session is listed (its ``parent_id``: a Codex ``spawn_agent`` thread's) is
    counted with it (``subagents``), not listed: the parent's import reads it (its calls with the parent's, once).
    One whose parent is not listed stays listed."""
    parents = {(e.agent, e.session_id): e for e in entries if not e.parent_id}
    out = []
    for entry in entries:
        parent = parents.get((entry.agent, entry.parent_id)) if entry.parent_id else None
        if parent is None:
            out.append(entry)
        else:
            parent.subagents += 1
    return out


def _without_resume_stubs(entries: list[SourceEntry]) -> list[SourceEntry]:
    """A file that holds no call and no prompt of a session another file holds is a stub, not listed: Gemini CLI's
    ``--resume`` first starts a file of its own under the resumed session's id (named by the minute), then writes
    the conversation on into the resumed file, so a resume in a later minute leaves one holding the
    ``<session_context>`` and nothing else (Gemini CLI's own session list leaves it out too)."""
    held = {(e.agent, e.session_id) for e in entries if e.calls or e.title}
    return [e for e in entries if e.calls or e.title or (e.agent, e.session_id) not in held]


def format_table(entries: list[SourceEntry]) -> str:
    """A plain-text table for the terminal."""
    if not entries:
        looked = ", ".join(f"{spec.display}: {spec.place.shown}" for spec in formats.FORMATS.values()
                           if spec.place and spec.in_usage)
        return f"No agent sessions found ({looked})."
    head = ("agent", "project", "session", "started", "last activity", "calls", "last prompt", "window",
            "% full", "path")
    rows = [head]
    for e in entries:
        rows.append((e.agent, shown_path(e.project)[:28], shown_path(e.session_id)[:13],
                     e.started[:16].replace("T", " "), e.last_activity[:16].replace("T", " "), str(e.calls),
                     "" if e.last_prompt_tokens is None else str(e.last_prompt_tokens),
                     "" if e.window is None else str(e.window),
                     "" if e.percent_full is None else f"{e.percent_full:.1f}", shown_path(e.path)))
    shown = [[printable(c) for c in r] for r in rows]  # names, paths and times from other agents' files, escaped
    widths = [max(len(r[i]) for r in shown) for i in range(len(head) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in shown)
