"""One conversation on disk, crash-safe, and the store of sessions (DESIGN.md "Data on disk").

A session is one folder::

    session.json          meta: id, title, created, updated, model, summary, system_prompt, calibrator,
                          undo stack, a pending-commit record        (atomic replace)
    history.jsonl         live history, one message per line        (append + fsync per message;
                          rewrites by atomic replace, only after archiving what leaves)
    events.jsonl          one ContextSnapshot per LLM call + every compaction event
    tool_results/*.txt    full tool outputs that were cut in the context (engine.context.offload)
    dialog/YYYY-MM-DD.jsonl  messages removed from the context (engine.store.archive)
    undo/<event id>.json  what a compaction removed, so it can be undone

Guarantees:

- :meth:`Session.append` returns only after the message line is fsync'd: an acknowledged message
  survives a crash.
- A rewrite that drops messages archives them first (``dialog/``), then replaces ``history.jsonl``
  atomically. Compactions commit in two phases: a ``pending`` record (new summary, ids that must be
  gone, ids that must be present) is saved in ``session.json`` before the history is replaced and
  cleared after; :meth:`Session.load` completes or discards an interrupted commit by looking at
  which ids the history holds. No acknowledged message is ever lost or duplicated.
- Loading a folder whose last line is torn (crash mid-write) keeps every complete line, moves the
  torn bytes to ``history.jsonl.torn-<timestamp>`` and says so in :attr:`Session.load_report`;
  lines that are not valid messages (or repeat an id) go to ``history.jsonl.invalid-<timestamp>``,
  reported the same way. Nothing is silently dropped.

Snapshots are written to ``events.jsonl`` without their per-message token list (it would make the
file quadratic in the history length); ``message_count`` says how many messages they covered.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
    fcntl = None  # type: ignore[assignment]

from engine.context.budget import (
    Calibrator,
    ContextSnapshot,
    WindowInfo,
    build_snapshot,
    resolve_context_window,
    resolve_window,
)
from engine.context.tokens import Estimator, HeuristicEstimator, TokenCache, TokenLedger
from engine.model.events import Event, event_to_json
from engine.model.messages import (
    HISTORY_ROLES,
    Message,
    MessageError,
    message_date,
    new_id,
    now_iso,
    validate_message,
)
from engine.store import archive
from engine.store.config import Settings, data_dir
from engine.store.fsutil import (
    append_bytes,
    append_lines,
    atomic_write_bytes,
    atomic_write_json,
    count_file_lines,
    dumps_line,
    fsync_dir,
    json_loads,
    read_jsonl_objects,
)

FORMAT = 1
SESSION_FILE = "session.json"
HISTORY_FILE = "history.jsonl"
EVENTS_FILE = "events.jsonl"
UNDO_DIR = "undo"
LOCK_FILE = ".lock"
MAX_UNDO = 20
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class SessionError(Exception):
    """A session operation that cannot be done; the text says why."""


class SessionLockedError(SessionError):
    """The session folder is held by another ctxbench process (see :meth:`Session.lock`)."""


class SessionClosedError(SessionError):
    pass


@dataclass
class LoadReport:
    """What :meth:`Session.load` found and repaired."""

    messages: int = 0
    torn_bytes: int = 0
    torn_path: Path | None = None
    invalid: list[str] = field(default_factory=list)  # one description per rejected line
    invalid_path: Path | None = None
    repaired: list[str] = field(default_factory=list)  # other repairs (meta, pending commit, newline)

    @property
    def clean(self) -> bool:
        return not (self.torn_bytes or self.invalid or self.repaired)

    def describe(self) -> str:
        parts = []
        if self.torn_bytes:
            parts.append(
                f"history.jsonl ended with a torn line ({self.torn_bytes} bytes, a write cut short); "
                f"moved to {self.torn_path.name if self.torn_path else '?'}"
            )
        if self.invalid:
            where = self.invalid_path.name if self.invalid_path else "?"
            listed = "; ".join(self.invalid[:5])
            parts.append(f"{len(self.invalid)} invalid line(s) moved to {where}: {listed}")
        parts.extend(self.repaired)
        return "\n".join(parts) if parts else f"{self.messages} messages, no damage"


@dataclass
class UndoResult:
    event_id: str
    restored: list[Message]
    missing: list[str]  # ids the undo point names that are nowhere to be found
    summary: str


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _line(msg: Message) -> bytes:
    """One history line; lone surrogates (from undecodable bytes) become U+FFFD, in place."""
    try:
        return dumps_line(msg)
    except UnicodeEncodeError:
        cleaned = _clean(msg)
        msg.clear()
        msg.update(cleaned)
        return dumps_line(msg)


def window_for(settings: Settings, window: WindowInfo | int | None = None) -> WindowInfo:
    """The window to plan with: given, else the settings' override, else model info, else max_tokens × 4."""
    if isinstance(window, WindowInfo):
        return window
    if isinstance(window, int):
        return resolve_window(None, window, settings.max_tokens)
    if settings.context_window is not None:
        return resolve_window(None, settings.context_window, settings.max_tokens)
    return resolve_context_window(settings.model, None, settings.max_tokens)


def check_message(obj: Any, where: str) -> Message:
    """A message fit for the history: valid OpenAI format and a history role (user/assistant/tool)."""
    msg = validate_message(obj, where)
    if msg["role"] not in HISTORY_ROLES:
        raise MessageError(f"{where}: role {msg['role']!r} does not belong in the history")
    return msg


class Session:
    """One conversation folder. Methods are synchronous and durable when they return."""

    def __init__(
        self, path: Path, meta: dict[str, Any], messages: list[Message], estimator: Estimator
    ) -> None:
        self.path = Path(path)
        self.meta = meta
        self.messages: list[Message] = messages
        self.estimator = estimator
        self.ledger = TokenLedger(TokenCache(estimator), messages)
        self.calibrator = Calibrator.from_json(meta.get("calibrator"))
        self.load_report = LoadReport(messages=len(messages))
        self.closed = False
        self._index: dict[str, int] = {}
        self._reindex()
        self._close_callbacks: list[Callable[[], None]] = []
        self._lock_fd: int | None = None
        self.compaction_lock: Any = None  # an asyncio.Lock, created by engine.context.compaction on first use

    # ------------------------------------------------------------------ creation and loading

    @classmethod
    def create(
        cls,
        path: Path,
        title: str = "",
        *,
        estimator: Estimator | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Session:
        """Make a new session folder at ``path`` (which must not exist, or be an empty folder)."""
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise SessionError(f"cannot create a session at {path}: it already exists and is not empty")
        path.mkdir(parents=True, exist_ok=True)
        now = now_iso()
        data: dict[str, Any] = {
            "format": FORMAT,
            "id": path.name,
            "title": title or path.name,
            "created": now,
            "updated": now,
            "model": "",
            "summary": "",
            "calibrator": None,
            "undo": [],
            "pending": None,
        }
        data.update(meta or {})
        atomic_write_bytes(path / HISTORY_FILE, b"")
        atomic_write_json(path / SESSION_FILE, data)
        fsync_dir(path.parent)
        return cls(path, data, [], estimator or HeuristicEstimator())

    @classmethod
    def load(
        cls, path: Path, *, estimator: Estimator | None = None, retention_days: int | None = None
    ) -> Session:
        """Open an existing session folder, repairing (and reporting) crash damage.

        With ``retention_days``, offloaded files older than that which nothing live points to are
        deleted (SPEC §3 retention, done at start-up).
        """
        path = Path(path)
        if not path.is_dir():
            raise SessionError(f"no session folder at {path}")
        report = LoadReport()
        meta = cls._load_meta(path, report)
        messages = cls._load_history(path, report)
        session = cls(path, meta, messages, estimator or HeuristicEstimator())
        report.messages = len(messages)
        session.load_report = report
        session._recover_pending()
        if retention_days is not None:
            session.cleanup_offloads(retention_days)
        return session

    @staticmethod
    def _load_meta(path: Path, report: LoadReport) -> dict[str, Any]:
        meta_path = path / SESSION_FILE
        problem = ""
        meta: Any = None
        if meta_path.exists():
            try:
                meta = json_loads(meta_path.read_bytes())
            except (ValueError, OSError) as exc:
                problem = f"session.json could not be read ({exc})"
            if meta is not None and not isinstance(meta, dict):
                problem, meta = "session.json does not hold a JSON object", None
        else:
            problem = "session.json was missing"
        if meta is None:
            if meta_path.exists():
                aside = path / f"{SESSION_FILE}.corrupt-{_stamp()}"
                os.replace(meta_path, aside)
                problem += f"; moved to {aside.name}"
            meta = {"format": FORMAT, "id": path.name, "title": path.name, "created": now_iso()}
            summary = _last_summary(path / EVENTS_FILE)
            meta["summary"] = summary
            if summary:
                problem += "; summary recovered from events.jsonl"
            atomic_write_json(meta_path, meta)
            report.repaired.append(problem + "; rebuilt it")
        meta.setdefault("id", path.name)
        meta.setdefault("title", meta["id"])
        meta.setdefault("summary", "")
        meta.setdefault("undo", [])
        meta.setdefault("pending", None)
        bad = _bad_meta_fields(meta)
        if bad:  # keep the file as it was, then reset the fields the app cannot use
            aside = path / f"{SESSION_FILE}.corrupt-{_stamp()}"
            atomic_write_bytes(aside, meta_path.read_bytes())
            defaults = {"id": path.name, "title": path.name, "summary": "", "undo": [], "pending": None,
                        "calibrator": None, "system_prompt": "", "tools": None}
            for key in bad:
                meta[key] = defaults[key]
            atomic_write_json(meta_path, meta)
            report.repaired.append(
                f"session.json: {', '.join(f'{k!r} {why}' for k, why in bad.items())}; reset "
                f"(the original file is kept as {aside.name})"
            )
        return meta

    @staticmethod
    def _load_history(path: Path, report: LoadReport) -> list[Message]:
        hist = path / HISTORY_FILE
        if not hist.exists():
            return []
        data = hist.read_bytes()
        raw_lines = data.split(b"\n")
        tail = raw_lines.pop()  # bytes after the last newline: b"" when the file ends cleanly
        messages: list[Message] = []
        good: list[bytes] = []
        bad: list[bytes] = []
        seen: set[str] = set()
        rewrite = False
        reserialised: list[int] = []

        def take(raw: bytes, n: int) -> bool:
            try:
                obj = json_loads(raw)
                msg = check_message(obj, f"line {n}")
            except (ValueError, MessageError) as exc:
                why = str(exc) if isinstance(exc, MessageError) else f"line {n}: not JSON ({exc})"
                report.invalid.append(why)
                return False
            mid = msg.get("id")
            if not isinstance(mid, str) or not mid:
                msg["id"] = new_id()
                msg.setdefault("ts", now_iso())
                report.repaired.append(f"line {n}: message had no id; gave it {msg['id']}")
                reserialised.append(n)
                good.append(_line(msg))
                messages.append(msg)
                return True
            if mid in seen:
                report.invalid.append(f"line {n}: repeats message id {mid}")
                return False
            seen.add(mid)
            messages.append(msg)
            good.append(raw + b"\n")
            return True

        for n, raw in enumerate(raw_lines, start=1):
            if not raw.strip():
                rewrite = True
                continue
            if not take(raw, n):
                bad.append(raw + b"\n")
                rewrite = True
        if tail.strip():
            n = len(raw_lines) + 1
            try:
                complete = isinstance(json_loads(tail), dict)
            except ValueError:
                complete = False
            if complete and take(tail, n):
                report.repaired.append(f"line {n} was complete but had no final newline; kept it")
            else:
                if complete:  # a complete line that is not a valid message: report as invalid
                    bad.append(tail + b"\n")
                else:
                    report.torn_bytes = len(tail)
                    report.torn_path = path / f"{HISTORY_FILE}.torn-{_stamp()}"
                    atomic_write_bytes(report.torn_path, tail)
            rewrite = True
        if bad:
            report.invalid_path = path / f"{HISTORY_FILE}.invalid-{_stamp()}"
            atomic_write_bytes(report.invalid_path, b"".join(bad))
        if rewrite or reserialised:
            atomic_write_bytes(hist, b"".join(good))
        return messages

    # ------------------------------------------------------------------ basic properties

    @property
    def id(self) -> str:
        """The folder name: what the store opens it by."""
        return self.path.name

    @property
    def title(self) -> str:
        return str(self.meta.get("title") or self.id)

    @property
    def summary(self) -> str:
        return str(self.meta.get("summary") or "")

    @property
    def system_prompt(self) -> str:
        return str(self.meta.get("system_prompt") or "")

    @property
    def history_path(self) -> Path:
        return self.path / HISTORY_FILE

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    def __len__(self) -> int:
        return len(self.messages)

    def index_of(self, msg_id: str) -> int:
        try:
            return self._index[msg_id]
        except KeyError:
            raise SessionError(f"no message with id {msg_id!r} in session {self.id}") from None

    def __contains__(self, msg_id: object) -> bool:
        return msg_id in self._index

    def archive_days(self) -> list[str]:
        """Days of the dialog archive, ascending (for :func:`engine.context.compaction.summary_block`)."""
        return archive.list_days(self.path)

    def get(self, msg_id: str) -> Message:
        return self.messages[self.index_of(msg_id)]

    def _reindex(self) -> None:
        self._index = {str(m.get("id")): i for i, m in enumerate(self.messages)}

    def _check_open(self) -> None:
        if self.closed:
            raise SessionClosedError(f"session {self.id} is closed")

    def set_estimator(self, estimator: Estimator) -> None:
        """Count with another estimator from now on (the ledger is rebuilt)."""
        self.estimator = estimator
        self.ledger = TokenLedger(TokenCache(estimator), self.messages)

    # ------------------------------------------------------------------ meta

    def save_meta(self) -> None:
        self._check_open()
        self.meta["updated"] = now_iso()
        self.meta["calibrator"] = self.calibrator.to_json()
        self.meta["message_count"] = len(self.messages)
        atomic_write_json(self.path / SESSION_FILE, self.meta)

    def set_title(self, title: str) -> None:
        title = title.strip()
        if not title:
            raise SessionError("a session title cannot be empty")
        self.meta["title"] = title
        self.save_meta()

    def set_summary(self, text: str) -> None:
        self.meta["summary"] = text
        self.save_meta()

    def set_meta(self, **values: Any) -> None:
        self.meta.update(values)
        self.save_meta()

    # ------------------------------------------------------------------ history

    def _prepare(self, msg: Message) -> Message:
        msg.setdefault("id", new_id())
        msg.setdefault("ts", now_iso())
        return check_message(msg, f"message {msg.get('id')}")

    def append(self, msg: Message) -> Message:
        """Append one message; returns once its line is fsync'd (the message is acknowledged)."""
        self.extend([msg])
        return msg

    def extend(self, messages: Iterable[Message]) -> list[Message]:
        """Append messages as one fsync'd write."""
        self._check_open()
        batch = [self._prepare(m) for m in messages]
        ids = [str(m["id"]) for m in batch]
        dup = [i for i in ids if i in self._index]
        if dup or len(set(ids)) != len(ids):
            raise SessionError(f"message id already in session {self.id}: {(dup or ids)[0]}")
        if not batch:
            return []
        data = b"".join(_line(m) for m in batch)
        append_bytes(self.history_path, data)
        for m in batch:
            self._index[str(m["id"])] = len(self.messages)
            self.messages.append(m)
            self.ledger.append(m)
        return batch

    def _write_history(self, messages: Sequence[Message]) -> None:
        atomic_write_bytes(self.history_path, b"".join(_line(m) for m in messages))

    def update_message(self, msg_id: str, msg: Message) -> None:
        """Replace a stored message (an offload cut, a final streamed text); the id stays the same."""
        msg.setdefault("id", msg_id)
        if msg["id"] != msg_id:
            raise SessionError(f"update_message: id {msg['id']!r} does not match {msg_id!r}")
        self.update_messages([msg])

    def update_messages(self, messages: Iterable[Message]) -> None:
        """Replace several stored messages by id with one atomic rewrite of history.jsonl."""
        self._check_open()
        changes = [(self.index_of(str(m.get("id"))), self._prepare(m)) for m in messages]
        if not changes:
            return
        new = list(self.messages)
        for i, m in changes:
            new[i] = m
        self._write_history(new)
        for i, m in changes:
            self.messages[i] = m
            self.ledger.replace(i, m)

    def rewrite(self, messages: Sequence[Message], *, archived: Iterable[Message] = ()) -> list[str]:
        """Replace the history with ``messages``; archive every dropped message first.

        ``archived`` lists messages the caller already archived. Returns the archive days written.
        """
        self._check_open()
        new = self._validated(messages)
        new_ids = {str(m["id"]) for m in new}
        done = {str(m.get("id")) for m in archived}
        dropped = [m for m in self.messages if str(m.get("id")) not in new_ids | done]
        days = archive.append(self.path, dropped) if dropped else []
        self._write_history(new)
        self._set_messages(new)
        return days

    def _validated(self, messages: Sequence[Message]) -> list[Message]:
        new = [self._prepare(m) for m in messages]
        seen: set[str] = set()
        for m in new:
            mid = str(m["id"])
            if mid in seen:
                raise SessionError(f"rewrite: message id {mid} appears twice")
            seen.add(mid)
        return new

    def _set_messages(self, messages: list[Message]) -> None:
        self.messages = messages
        self._reindex()
        self.ledger.reset(messages)

    # ------------------------------------------------------------------ compaction commits

    def commit_compaction(
        self,
        messages: Sequence[Message],
        *,
        summary: str,
        archived: Iterable[Message] = (),
        undo_point: dict[str, Any] | None = None,
        undo_pop: str | None = None,
    ) -> list[str]:
        """Replace history and summary together, crash-safely; return the archive days written.

        Order: archive what leaves → write the undo point → save a ``pending`` record in
        session.json → atomically replace history.jsonl → set the summary and undo stack and clear
        the pending record. :meth:`load` finishes or discards a commit cut short between the steps.
        """
        self._check_open()
        new = self._validated(messages)
        new_ids = {str(m["id"]) for m in new}
        old_ids = set(self._index)
        done = {str(m.get("id")) for m in archived}
        dropped = [m for m in self.messages if str(m.get("id")) not in new_ids]
        to_archive = [m for m in dropped if str(m.get("id")) not in done]
        days = archive.append(self.path, to_archive) if to_archive else []
        if undo_point is not None:
            atomic_write_json(self._undo_path(str(undo_point["id"])), undo_point)
        self.meta["pending"] = {
            "summary": summary,
            "absent": [str(m.get("id")) for m in dropped],
            "present": [i for i in (str(m["id"]) for m in new) if i not in old_ids],
            "undo_push": undo_point["id"] if undo_point is not None else None,
            "undo_pop": undo_pop,
            "ts": now_iso(),
        }
        self.save_meta()
        self._write_history(new)
        self._set_messages(new)
        self._finish_pending()
        return days

    def _finish_pending(self) -> None:
        pending = self.meta.get("pending") or {}
        self.meta["summary"] = pending.get("summary", self.summary)
        stack: list[str] = list(self.meta.get("undo") or [])
        pop = pending.get("undo_pop")
        if pop:
            if pop in stack:
                stack.remove(pop)
            self._undo_path(pop).unlink(missing_ok=True)
        push = pending.get("undo_push")
        if push:
            stack.append(push)
            while len(stack) > MAX_UNDO:
                self._undo_path(stack.pop(0)).unlink(missing_ok=True)
        self.meta["undo"] = stack
        self.meta["pending"] = None
        self.save_meta()

    def _recover_pending(self) -> None:
        pending = self.meta.get("pending")
        if not pending:
            return
        ids = set(self._index)
        absent = pending.get("absent") or []
        present = pending.get("present") or []
        if all(a not in ids for a in absent) and all(p in ids for p in present):
            self._finish_pending()
            self.load_report.repaired.append(
                "finished a compaction that was cut short after the history rewrite"
            )
        else:
            push = pending.get("undo_push")
            if push:
                self._undo_path(push).unlink(missing_ok=True)
            self.meta["pending"] = None
            self.save_meta()
            self.load_report.repaired.append(
                "discarded a compaction that was cut short before the history rewrite (history unchanged)"
            )

    def _undo_path(self, event_id: str) -> Path:
        if not _ID_RE.match(event_id):
            raise SessionError(f"bad undo id {event_id!r}")
        return self.path / UNDO_DIR / f"{event_id}.json"

    def undo_stack(self) -> list[str]:
        return list(self.meta.get("undo") or [])

    def read_undo_point(self, event_id: str) -> dict[str, Any]:
        try:
            data = json_loads(self._undo_path(event_id).read_bytes())
        except (OSError, ValueError) as exc:
            raise SessionError(f"undo point {event_id} cannot be read: {exc}") from exc
        if not isinstance(data, dict):
            raise SessionError(f"undo point {event_id} is not a JSON object")
        return data

    def undo_last(self) -> UndoResult:
        """Restore the history and summary from before the latest compaction (the archive keeps its copy).

        Messages added since that compaction stay, after the restored ones. Running it again after a
        crash never duplicates a message: ids already live are not restored twice.
        """
        self._check_open()
        stack = self.undo_stack()
        if not stack:
            raise SessionError("nothing to undo")
        event_id = stack[-1]
        point = self.read_undo_point(event_id)
        removed = {str(m.get("id")): m for m in point.get("removed") or []}
        live = {str(m.get("id")): m for m in self.messages}
        order = [str(i) for i in point.get("order") or []]
        new: list[Message] = []
        placed: set[str] = set()
        missing: list[str] = []
        for mid in order:
            m = live.get(mid) or removed.get(mid)
            if m is None:
                missing.append(mid)
                continue
            new.append(m)
            placed.add(mid)
        new.extend(m for m in self.messages if str(m.get("id")) not in placed)
        restored = [m for mid, m in removed.items() if mid in placed and mid not in live]
        self.commit_compaction(new, summary=str(point.get("summary") or ""), undo_pop=event_id)
        return UndoResult(event_id, restored, missing, self.summary)

    # ------------------------------------------------------------------ archive restore

    def restore_from_archive(self, ids: Iterable[str]) -> list[Message]:
        """Bring archived messages back into the history (with their tool-call partners).

        They go where they belong in time: before the first live message that is not older, moved
        earlier to the nearest clean cut so no call is separated from its result. Messages already
        live are skipped. Returns the messages restored.
        """
        from engine.context.turns import clean_cut_points

        self._check_open()
        chosen = archive.restore_selection(self.path, ids)
        restored = [dict(m) for m in chosen if str(m.get("id")) not in self._index]
        if not restored:
            return []
        first = _ts_key(restored[0])
        pos = len(self.messages)
        for i, m in enumerate(self.messages):
            if _ts_key(m) >= first:
                pos = i
                break
        ok = clean_cut_points(self.messages)
        while pos > 0 and not ok[pos]:
            pos -= 1
        new = self.messages[:pos] + restored + self.messages[pos:]
        self.rewrite(new)
        return restored

    # ------------------------------------------------------------------ events

    def record_snapshot(self, snapshot: ContextSnapshot) -> None:
        """Append one ContextSnapshot (one LLM call) to events.jsonl; save the calibrator state."""
        self._check_open()
        data = snapshot.to_json()
        data["message_count"] = len(snapshot.message_tokens)
        data["message_tokens"] = []
        data["type"] = "context"
        append_lines(self.events_path, [data])
        self.save_meta()

    def record_event(self, event: Event | dict[str, Any]) -> None:
        self._check_open()
        data = event_to_json(event) if isinstance(event, Event) else dict(event)
        append_lines(self.events_path, [data])

    def read_events(self, problems: list[str] | None = None) -> list[dict[str, Any]]:
        """Every event recorded, oldest first; a torn or bad line is skipped (and described in problems)."""
        if not self.events_path.exists():
            return []
        return read_jsonl_objects(self.events_path, problems, EVENTS_FILE)

    def snapshots(self, problems: list[str] | None = None) -> list[ContextSnapshot]:
        """The recorded snapshots, oldest first; a damaged one is skipped (and described in problems)."""
        out: list[ContextSnapshot] = []
        for n, event in enumerate(self.read_events(problems), start=1):
            if event.get("type") != "context":
                continue
            try:
                out.append(ContextSnapshot.from_json(event))
            except ValueError as exc:
                if problems is not None:
                    problems.append(f"{EVENTS_FILE}: context event {n}: {exc}")
        return out

    def compaction_events(self) -> list[dict[str, Any]]:
        return [e for e in self.read_events() if e.get("type") == "compaction"]

    # ------------------------------------------------------------------ tokens

    def token_counts(self, estimator: Estimator | None = None, messages: Sequence[Message] | None = None) -> list[int]:
        """Per-message tokens of the live history (or of ``messages``); the ledger's when it can."""
        return self._counts_for(estimator or self.estimator, messages)

    def _counts_for(self, estimator: Estimator, messages: Sequence[Message] | None) -> list[int]:
        same = estimator is self.estimator or (
            estimator.name == "heuristic" and self.estimator.name == "heuristic"
        )
        if messages is None and same:
            return list(self.ledger.counts)
        cache = self.ledger.cache if same else TokenCache(estimator)
        return [cache.count(m) for m in (self.messages if messages is None else messages)]

    def snapshot(
        self,
        settings: Settings,
        estimator: Estimator | None = None,
        system_prompt: str | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        draft: str = "",
        *,
        window: WindowInfo | int | None = None,
        messages: Sequence[Message] | None = None,
        summary: str | None = None,
        provider_prompt_tokens: int | None = None,
        call_index: int | None = None,
        calibrated: bool = True,
        model: str | None = None,
        prefix_tokens: int | None = None,
    ) -> ContextSnapshot:
        """The regions of the next request (or of ``messages``/``summary`` instead of the live ones).

        ``model`` labels the snapshot (default: the settings' model). ``prefix_tokens``: the system
        prompt and tool definitions as one count inferred from a provider's figure (another agent's,
        which its session file does not hold): the system region, instead of estimating
        ``system_prompt`` and ``tools``."""
        est = estimator or self.estimator
        msgs = self.messages if messages is None else list(messages)
        counts = self._counts_for(est, messages)
        system = self.system_prompt if system_prompt is None else system_prompt
        if prefix_tokens is not None:
            system_tokens, tools_tokens = prefix_tokens, 0
        else:
            system_tokens, tools_tokens = (est.text(system) if system else 0) + est.framing(), est.tools(tools)
        return build_snapshot(
            window=window_for(settings, window),
            system_tokens=system_tokens,
            summary_tokens=est.text(self.summary if summary is None else summary),
            tools_tokens=tools_tokens,
            history=msgs,
            history_counts=counts,
            estimator_name=est.name,
            threshold_ratio=settings.compact_threshold_ratio,
            calibrator=self.calibrator if calibrated else None,
            provider_prompt_tokens=provider_prompt_tokens,
            draft_tokens=est.text(draft) if draft else 0,
            model=settings.model if model is None else model,
            ts=now_iso(),
            call_index=call_index,
        )

    # ------------------------------------------------------------------ offload retention

    def referenced_files(self) -> set[str]:
        """Offloaded file names the history, the summary or an undo point still points to."""
        from engine.context.offload import referenced_files

        refs = referenced_files(self.messages, self.summary)
        for event_id in self.undo_stack():
            try:
                point = self.read_undo_point(event_id)
            except SessionError:
                continue
            refs |= referenced_files(point.get("removed") or [], str(point.get("summary") or ""))
        return refs

    def cleanup_offloads(self, days: int) -> list[Path]:
        from engine.context.offload import cleanup_retention

        return cleanup_retention(self.path, self.referenced_files(), days)

    # ------------------------------------------------------------------ closing

    def add_close_callback(self, callback: Callable[[], None]) -> None:
        self._close_callbacks.append(callback)

    def close(self) -> None:
        """Close the session: background work bound to it is cancelled; later writes raise."""
        if self.closed:
            return
        callbacks, self._close_callbacks = self._close_callbacks, []
        for cb in callbacks:
            cb()
        self.closed = True
        self.unlock()

    # ------------------------------------------------------------------ one writer per folder

    def lock(self) -> None:
        """Hold the folder for this process until :meth:`close`: a second ctxbench process that
        asks for it (the app, or ``ctxbench run`` on the same folder) gets :class:`SessionLockedError`
        instead of interleaving writes. An advisory ``flock`` on ``.lock``: the kernel releases it
        when the process dies, so a crash never leaves the session locked. Readers need no lock."""
        if self._lock_fd is not None or fcntl is None:
            return
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise SessionLockedError(
                f"session {self.id} is open in another ctxbench process{who}; close it there first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None and fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def _ts_key(msg: Message) -> datetime:
    ts = msg.get("ts")
    if isinstance(ts, str):
        try:
            parsed = datetime.fromisoformat(ts)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except ValueError:
            pass
    d = message_date(msg)
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bad_meta_fields(meta: dict[str, Any]) -> dict[str, str]:
    """Fields of session.json whose type the app cannot use: {field: what is wrong}."""
    bad: dict[str, str] = {}

    def strs(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(i, str) for i in value)

    def ids(value: Any) -> bool:
        return strs(value) and all(_ID_RE.match(i) for i in value)

    for key in ("id", "title"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            bad[key] = "is not a non-empty string"
    for key in ("summary", "system_prompt"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            bad[key] = f"is a {type(meta[key]).__name__}, not a string"
    if not ids(meta.get("undo")):
        bad["undo"] = "is not a list of undo ids"
    pending = meta.get("pending")
    if pending is not None and not (
        isinstance(pending, dict)
        and all(strs(pending.get(k) or []) for k in ("absent", "present"))
        and isinstance(pending.get("summary", ""), str)
        and all(v is None or (isinstance(v, str) and _ID_RE.match(v))
                for v in (pending.get("undo_push"), pending.get("undo_pop")))
    ):
        bad["pending"] = "is not a valid pending-commit record"
    cal = meta.get("calibrator")
    if cal is not None and not (
        isinstance(cal, dict)
        and all(cal.get(k) is None or _is_int(cal[k]) for k in ("last_raw", "last_actual"))
        and isinstance(cal.get("last_prefix") or [], list | tuple)
        and all(isinstance(i, str) for i in cal.get("last_prefix") or [])
        and (cal.get("last_fixed") is None or (
            isinstance(cal["last_fixed"], list | tuple) and len(cal["last_fixed"]) == 3
            and all(_is_int(v) for v in cal["last_fixed"])))
    ):
        bad["calibrator"] = "is not a valid calibration record"
    tools = meta.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        bad["tools"] = "is not a list of tool definitions"
    return bad


def _last_summary(events: Path) -> str:
    if not events.exists():
        return ""
    summary = ""
    for raw in events.read_bytes().splitlines():
        try:
            obj = json_loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "compaction" and obj.get("result") in (
            "summarized",
            "dropped",
            "undone",
        ):
            summary = str(obj.get("summary") or "")
    return summary


# --------------------------------------------------------------------------- the store


@dataclass
class SessionInfo:
    id: str
    title: str
    path: Path
    created: str
    updated: str
    message_count: int
    model: str = ""
    problem: str = ""


class SessionStore:
    """The sessions under one root folder (default ``data_dir()/sessions``)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else data_dir() / "sessions"
        self._open: dict[str, Session] = {}

    def new_id(self) -> str:
        return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"

    def path_for(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not _ID_RE.match(session_id) or ".." in session_id:
            raise SessionError(f"not a session id: {session_id!r}")
        return self.root / session_id

    def create(self, title: str = "", *, estimator: Estimator | None = None, **meta: Any) -> Session:
        self.root.mkdir(parents=True, exist_ok=True)
        sid = self.new_id()
        path = self.path_for(sid)
        session = Session.create(path, title or "New session", estimator=estimator, meta=meta or None)
        self._open[sid] = session
        return session

    def open(
        self, id_or_path: str | Path, *, estimator: Estimator | None = None, retention_days: int | None = None
    ) -> Session:
        """Load a session by id (under the root) or by folder path."""
        candidate = Path(id_or_path)
        if isinstance(id_or_path, Path) or os.sep in str(id_or_path) or candidate.is_absolute():
            path = candidate
        else:
            path = self.path_for(str(id_or_path))
        if not (path / SESSION_FILE).exists() and not (path / HISTORY_FILE).exists():
            raise SessionError(f"no session {str(id_or_path)!r} (looked in {path})")
        session = Session.load(path, estimator=estimator, retention_days=retention_days)
        self._open[session.id] = session
        return session

    def rename(self, session_id: str, title: str) -> None:
        title = title.strip()
        if not title:
            raise SessionError("a session title cannot be empty")
        live = self._open.get(session_id)
        if live is not None and not live.closed:
            live.set_title(title)
            return
        path = self.path_for(session_id)
        meta_path = path / SESSION_FILE
        try:
            meta = json_loads(meta_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SessionError(f"cannot rename session {session_id}: {exc}") from exc
        meta["title"] = title
        meta["updated"] = now_iso()
        atomic_write_json(meta_path, meta)

    def delete(self, session_id: str) -> None:
        """Delete a session folder (renamed aside first, so a listing never sees half of it)."""
        path = self.path_for(session_id)
        if not path.is_dir():
            raise SessionError(f"no session {session_id!r}")
        live = self._open.pop(session_id, None)
        if live is not None:
            live.close()
        doomed = self.root / f".deleted-{session_id}-{uuid.uuid4().hex[:6]}"
        os.replace(path, doomed)
        fsync_dir(self.root)
        shutil.rmtree(doomed, ignore_errors=True)

    def list(self) -> list[SessionInfo]:
        """Every session, most recently updated first; reads session.json and counts history lines."""
        if not self.root.is_dir():
            return []
        out: list[SessionInfo] = []
        for path in self.root.iterdir():
            if not path.is_dir() or path.name.startswith("."):
                continue
            meta_path = path / SESSION_FILE
            problem = ""
            meta: dict[str, Any] = {}
            try:
                loaded = json_loads(meta_path.read_bytes())
                meta = loaded if isinstance(loaded, dict) else {}
                if not meta:
                    problem = "session.json is not an object"
            except (OSError, ValueError) as exc:
                if not (path / HISTORY_FILE).exists():
                    continue  # not a session folder
                problem = f"session.json unreadable: {exc}"
            hist = path / HISTORY_FILE
            updated = str(meta.get("updated") or "")
            if hist.exists():
                mtime = datetime.fromtimestamp(hist.stat().st_mtime, UTC).isoformat(timespec="milliseconds")
                updated = max(updated, mtime)
            out.append(
                SessionInfo(
                    id=path.name,
                    title=str(meta.get("title") or path.name),
                    path=path,
                    created=str(meta.get("created") or ""),
                    updated=updated,
                    message_count=count_file_lines(hist),
                    model=str(meta.get("model") or ""),
                    problem=problem,
                )
            )
        out.sort(key=lambda s: s.updated, reverse=True)
        return out
