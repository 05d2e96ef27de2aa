"""One conversation on disk, crash-safe (DESIGN.md "Data on disk"): the persistence half of a session.

A session is one folder::

    session.json          meta: id, title, created, updated, model, summary, system_prompt, calibrator,
                          undo stack, a pending-commit record        (atomic replace)
    history.jsonl         live history, one message per line        (append + fsync per message;
                          rewrites by atomic replace, only after archiving what leaves)
    events.jsonl          one ContextSnapshot per LLM call + every compaction event: typed records
                          (engine.model.records), appended only by append_records (fsync'd),
                          read by engine.store.event_log.read_records (bad lines skipped and named)
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

The in-memory context state that needs token counting (the ledger, calibration, snapshots) is
the other half: :class:`engine.context.conversation.Session` extends :class:`StoredSession`.
Loading and repair are in :mod:`engine.store.session_load`, the store of sessions in
:mod:`engine.store.sessions`.

Snapshots are written to ``events.jsonl`` without their per-message token list (it would make the
file quadratic in the history length); ``message_count`` says how many messages they covered.
"""


from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
    fcntl = None  # type: ignore[assignment]

from engine.model.events import CompactionEvent
from engine.model.messages import Message, new_id, now_iso
from engine.model.records import (
    CompactionRecord,
    ContextRecord,
    Record,
    compaction_records,
    context_records,
    records_json,
)
from engine.model.snapshot import ContextSnapshot
from engine.store import archive
from engine.store.event_log import EVENTS_FILE, read_records
from engine.store.fsutil import (
    append_bytes,
    append_lines,
    atomic_write_bytes,
    atomic_write_json,
    fsync_dir,
    json_loads,
)
from engine.store.offloads import cleanup_retention, referenced_files
from engine.store.session_load import (
    FORMAT,
    HISTORY_FILE,
    ID_RE,
    SESSION_FILE,
    LoadReport,
    _line,
    check_message,
    load_history,
    load_meta,
)
from engine.store.staging import collection_paused

UNDO_DIR = "undo"
LOCK_FILE = ".lock"
MAX_UNDO = 20


class SessionError(Exception):
    """A session operation that cannot be done; the text says why."""


class SessionLockedError(SessionError):
    """The session folder is held by another ctxbench process (see :meth:`Session.lock`)."""


class SessionClosedError(SessionError):
    pass


@dataclass
class UndoResult:
    event_id: str
    restored: list[Message]
    missing: list[str]  # ids the undo point names that are nowhere to be found
    summary: str



class StoredSession:
    """One conversation folder. Methods are synchronous and durable when they return.

    ``estimator`` is for :class:`engine.context.conversation.Session`, which counts tokens; here it
    is ignored."""

    def __init__(
        self, path: Path, meta: dict[str, Any], messages: list[Message], estimator: Any = None
    ) -> None:
        self.path = Path(path)
        self.meta = meta
        self.messages: list[Message] = messages
        self.load_report = LoadReport(messages=len(messages))
        self.closed = False
        self._index: dict[str, int] = {}
        self._reindex()
        self._close_callbacks: list[Callable[[], None]] = []
        self._lock_fd: int | None = None
        self.compaction_lock: Any = None  # an asyncio.Lock, created by engine.context.compaction on first use
        # events.jsonl as last read (its records, its problems): this object is the file's one writer, and drops it
        # on every write, so the views, the costs and the calibration that ask for it in turn read it once
        self._records: tuple[list[Record], list[str]] | None = None

    # ------------------------------------------------------------------ creation and loading

    @classmethod
    def create(
        cls,
        path: Path,
        title: str = "",
        *,
        estimator: Any = None,
        meta: dict[str, Any] | None = None,
    ) -> Self:
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
        return cls(path, data, [], estimator)

    @classmethod
    def load(
        cls, path: Path, *, estimator: Any = None, retention_days: int | None = None
    ) -> Self:
        """Open an existing session folder, repairing (and reporting) crash damage.

        With ``retention_days``, offloaded files older than that which nothing live points to are
        deleted (SPEC §3 retention, done at start-up). A bulk read: the collector is paused while the
        folder is read and the session built (:func:`engine.store.staging.collection_paused`).
        """
        path = Path(path)
        if not path.is_dir():
            raise SessionError(f"no session folder at {path}")
        report = LoadReport()
        with collection_paused():
            meta = load_meta(path, report)
            messages = load_history(path, report)
            session = cls(path, meta, messages, estimator)
            report.messages = len(messages)
            session.load_report = report
            session._recover_pending()
        if retention_days is not None:
            session.cleanup_offloads(retention_days)
        return session

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

    # ------------------------------------------------------------------ meta

    def save_meta(self) -> None:
        self._check_open()
        self.meta["updated"] = now_iso()
        self._before_save()
        self.meta["message_count"] = len(self.messages)
        atomic_write_json(self.path / SESSION_FILE, self.meta)

    def _before_save(self) -> None:
        """Put in-memory state into ``meta`` before it is written (the calibrator, in the subclass)."""

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
        self._on_append(batch)
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
        self._on_replace(changes)

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
        self._on_reset()

    # hooks for the in-memory state kept beside the history (the token ledger, in the subclass)

    def _on_append(self, batch: Sequence[Message]) -> None:
        """``batch`` was appended to :attr:`messages`."""

    def _on_replace(self, changes: Sequence[tuple[int, Message]]) -> None:
        """The messages at these indexes were replaced."""

    def _on_reset(self) -> None:
        """:attr:`messages` was replaced as a whole."""

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
        if not ID_RE.match(event_id):
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

    # ------------------------------------------------------------------ events

    def record_snapshot(self, snapshot: ContextSnapshot) -> None:
        """Append one ContextSnapshot (one LLM call) to events.jsonl; save the calibrator state."""
        self.append_records([ContextRecord.from_snapshot(snapshot)])
        self.save_meta()

    def record_event(self, event: CompactionEvent | CompactionRecord) -> None:
        """Append a finished compaction to events.jsonl."""
        self.append_records([CompactionRecord.from_event(event) if isinstance(event, CompactionEvent) else event])

    def append_records(self, records: Sequence[Record]) -> int:
        """The one write path of events.jsonl: append ``records`` as one fsync'd write; return the file's size
        before it (where the first of them starts)."""
        self._check_open()
        self._records = None
        size = self.events_path.stat().st_size if self.events_path.exists() else 0
        if records:
            append_lines(self.events_path, records_json(records))
        return size

    def replace_records_from(self, offset: int, records: Sequence[Record]) -> None:
        """Cut events.jsonl at ``offset`` (the start of a record :meth:`append_records` wrote) and append
        ``records`` in its place: a followed source's last call, written again with new figures."""
        self._check_open()
        self._records = None
        with open(self.events_path, "r+b") as fh:
            fh.truncate(offset)
        self.append_records(records)

    def read_records(self, problems: list[str] | None = None) -> list[Record]:
        """Every record, oldest first; a torn or bad line is skipped (and described in problems). Read from the file
        once until this session writes it again (the records are frozen: the list is a copy)."""
        if self._records is None:
            found: list[str] = []
            self._records = (read_records(self.events_path, found, EVENTS_FILE), found)
        if problems is not None:
            problems.extend(self._records[1])
        return list(self._records[0])

    def prime_records(self, records: Sequence[Record]) -> None:
        """``records`` are what events.jsonl was just written with, whole (by the writer that made this folder, an
        import in a worker thread): :meth:`read_records` returns them without reading the file again. Only for a
        file nothing has changed since."""
        self._records = (list(records), [])

    def read_events(self, problems: list[str] | None = None) -> list[dict[str, Any]]:
        """Every record as its JSON line (:meth:`read_records`), oldest first."""
        return records_json(self.read_records(problems))

    def snapshots(self, problems: list[str] | None = None) -> list[ContextSnapshot]:
        """The recorded snapshots, oldest first; a damaged one is skipped (and described in problems)."""
        return [r.snapshot for r in context_records(self.read_records(problems))]

    def compaction_events(self) -> list[CompactionRecord]:
        return compaction_records(self.read_records())

    # ------------------------------------------------------------------ offload retention

    def referenced_files(self) -> set[str]:
        """Offloaded file names the history, the summary or an undo point still points to."""
        refs = referenced_files(self.messages, self.summary)
        for event_id in self.undo_stack():
            try:
                point = self.read_undo_point(event_id)
            except SessionError:
                continue
            refs |= referenced_files(point.get("removed") or [], str(point.get("summary") or ""))
        return refs

    def cleanup_offloads(self, days: int) -> list[Path]:
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
