"""Sources: the agent sessions on this machine, opened read-only, followed live, continued in ctxbench.

Intents: scan_sources(refresh), start_source_scans(interval), open_source(path), continue_source(),
open_subagent(rel), open_parent(). Events: :class:`SourcesListed`, :class:`FollowChanged`, and the
usual session events (``SessionLoaded`` whose view says ``read_only`` and ``source``).

- **Scanning** runs :func:`engine.sources.discovery.scan_sources` in a worker thread (its index makes
  a rescan a ``stat`` per file); ``start_source_scans`` repeats it every 30 s.
- **A view**: the file is imported (:func:`engine.ingest.import_source`) into a private folder
  (:mod:`engine.workbench.source_views`) and opened as a Session that nothing writes: the service
  refuses send, slash commands, compaction, undo, restore and clear while a view is open (a notice
  says why). An agent object is built for the view only to draw the next request (system prompt and
  tools); it never runs. Leaving the view removes its folder; folders left by a crash are removed at
  the next view.
- **Following** (Claude Code and Codex files, :data:`engine.sources.follow.FOLLOWABLE`): the file
  is read once, when the view opens, into a :class:`engine.sources.follow.LineLog` (its complete
  lines, in memory: the file's size); then every :data:`FOLLOW_INTERVAL` s a worker thread has the
  log's :class:`engine.sources.follow.Tail` read what was appended (only the new bytes; a partial
  last line waits; truncation, replacement or a rewrite is a reset: the log is dropped and the file
  read again). When complete lines came, the refresh runs the full reader over the log's lines — not
  the file — (the conversation's chain, compaction boundaries and rewinds are only known from all
  lines) and imports the result into a new folder (about 0.15 s for a 3 MB Claude Code session), which takes
  the view folder's place (same path; the old one is removed; the folders are memory-backed where
  the system allows, :func:`engine.workbench.source_views.views_root`), then
  compares with what the window shows (messages by id and content, calls by time and prompt,
  compactions by content). When the shown calls and compactions are a prefix of the new ones and at
  most :data:`MAX_RETRACTED`
  shown messages at the end differ (Claude Code writes a response block by block, so its last
  message grows; a rewind drops the last few), only the difference is sent: ``MessagesRetracted``
  for the shown messages that changed, ``MessageAdded`` for the new and changed ones,
  ``CallRecorded`` for the new calls, ``CompactionFinished`` for a new compaction (once the call
  after it gave its ``tokens_after``), ``LastCall``, ``ImportChanged`` when the import record changed
  (the agent's own cost grew), then ``ContextStateChanged`` and
  ``SnapshotChanged``. Otherwise (a reset, a larger rewind) the whole view is sent
  again (``SessionLoaded``). Message ids stay the same from one read to the next
  (:func:`engine.workbench.source_views.stabilise_ids`). One refresh at a time (the loop awaits it); the
  old folder is removed after each refresh, so disk and memory stay flat.
- **Continue in ctxbench** imports the source as a normal session (the same path as File → Open) and
  opens it; when its next request is over the window of the model now configured, the compaction
  preview is opened.
- **Subagents**: ``open_subagent(rel)`` opens ``<open session>/<rel>`` (an imported Task subagent)
  read-only; ``open_parent()`` goes back (the source is read again, or the session reopened).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.context.conversation import Session
from engine.model.events import AgentState, MessageAdded, StateChanged
from engine.sources.follow import FOLLOWABLE
from engine.store.session import SessionError
from engine.workbench import source_views as sv
from engine.workbench.commands import Commands
from engine.workbench.core import one_line
from engine.workbench.events import (
    CallRecorded,
    CompactionFinished,
    ContextStateChanged,
    FollowChanged,
    ImportChanged,
    LastCall,
    MessagesRetracted,
    SessionLoaded,
    SnapshotChanged,
    SourcesListed,
)
from engine.workbench.turns import Turns
from engine.workbench.views import SessionView

FOLLOW_INTERVAL = 0.25  # seconds between two looks at a followed file
SCAN_INTERVAL = 30.0  # seconds between two scans of the sources
MAX_RETRACTED = 50  # more changed messages at the end than this: the view is sent again whole
READ_ONLY = "this is a read-only view of another agent's session: use Continue in ctxbench to talk to it"


def source_dict(entry: Any, now: float | None = None) -> dict[str, Any]:
    """A Sources-panel row: the discovery entry's fields, and ``live``."""
    out = entry.to_json()
    out["live"] = sv.is_live(entry.path, now)
    return out


class Sources(Commands, Turns):
    """The sources part of the service (see the module docstring)."""

    _view: sv.SourceView | None = None
    _views_cleaned = False
    _wake: asyncio.Event | None = None  # set by file_changed: look at the followed file now

    async def _warm_up(self) -> None:
        await super()._warm_up()
        self._reread_observed_view()

    def _reread_observed_view(self) -> None:
        """A view opened before litellm was loaded whose file names no window (SWE-agent, OpenHands)
        settled on the window it observed: read it again now that the model's window can be looked up."""
        view, session = self._view, self.session
        if not self._llm_ready or view is None or view.root is None or view.subagent or not view.source:
            return
        imported = session.meta.get("import") if session is not None else None
        if isinstance(imported, dict) and imported.get("window_source") == "observed":
            self.open_source(view.source)

    def file_changed(self, path: str) -> None:
        """A file watcher (the window's QFileSystemWatcher) saw ``path`` change: when it is the
        followed file, look now instead of at the next poll (polling stays as the fallback for
        file systems that send no notifications)."""
        view = self._view
        if view is not None and view.log is not None and path == view.source:
            if self._wake is None:
                self._wake = asyncio.Event()  # before the follow loop's first wait: it sees it set
            self._wake.set()

    def start(self) -> None:
        """As :meth:`Sessions.start`, and the view folders a crash left behind are removed."""
        super().start()
        self._views_cleaned = True
        self.tasks.spawn("views-cleanup", asyncio.to_thread(sv.remove_stale_views, sv.views_root()))

    # ------------------------------------------------------------------ scanning

    def scan_sources(self, refresh: bool = False) -> asyncio.Task[Any]:
        return self.tasks.spawn("sources", self._scan(refresh), replace=True)

    async def _scan(self, refresh: bool) -> list[dict[str, Any]]:
        from engine.sources.discovery import scan_sources

        entries = await asyncio.to_thread(scan_sources, self.settings, refresh=refresh)
        rows = [source_dict(e) for e in entries]
        self.emit(SourcesListed(rows))
        return rows

    def start_source_scans(self, interval: float = SCAN_INTERVAL) -> asyncio.Task[Any]:
        """Scan now and every ``interval`` seconds (until shutdown)."""
        return self.tasks.spawn("sources-watch", self._scan_loop(interval), replace=True)

    async def _scan_loop(self, interval: float) -> None:
        while True:
            try:
                await self._scan(False)
            except OSError as exc:
                self.notice("warning", f"cannot scan the agent sessions: {one_line(str(exc))}")
            await asyncio.sleep(interval)

    # ------------------------------------------------------------------ views

    @property
    def view(self) -> sv.SourceView | None:
        """The read-only view open now, if any."""
        return self._view

    def open_source(self, path: str | Path) -> asyncio.Task[Any]:
        return self.tasks.spawn("open", self._open_source(Path(path)), replace=True)

    async def _open_source(self, path: Path) -> None:
        await self._leave_session()
        await self._prepare_counting()
        root = sv.views_root()
        if not self._views_cleaned:
            self._views_cleaned = True
            await asyncio.to_thread(sv.remove_stale_views, root)
        self.emit(StateChanged(AgentState.IMPORTING))
        folder, prefix = sv.new_view_folder(root), sv.new_prefix()
        try:
            log = await asyncio.to_thread(sv.followed_log, path)  # read once: then only what is appended
            fmt = await asyncio.to_thread(sv.import_view, path, folder, prefix, self.settings, log,
                                      self._model_info())
            session = await asyncio.to_thread(Session.load, folder, estimator=self._estimator())
        except Exception as exc:  # a reader's SourceError, TranscriptError, OSError…: the view cannot be made
            sv.remove_view(folder)
            self.emit(StateChanged(self._state))
            self.notice("error", f"cannot open {path.name}: {one_line(str(exc))}")
            return
        self.emit(StateChanged(self._state))
        followed = log if fmt in FOLLOWABLE else None
        view = sv.SourceView(folder, folder, str(path), fmt, prefix, followed.tail if followed else None,
                             followed, live=sv.is_live(path))
        self._show_view(view, session)
        if view.tail is not None:
            self.tasks.spawn("follow", self._follow(view), replace=True)
            self.emit(FollowChanged(True, view.source, view.live))

    def _show_view(self, view: sv.SourceView, session: Session) -> None:
        self._view = view
        self._load(session)

    def session_view(self) -> SessionView:
        out = super().session_view()
        view = self._view
        if view is None:
            return out
        view.message_keys = [sv.message_key(m) for m in out.messages]
        view.message_ids = [str(m.get("id")) for m in out.messages]
        view.call_keys = [sv.call_key(r) for r in out.timeline]
        view.compaction_keys = [sv.compaction_key(c) for c in sv.shown_compactions(out.compactions)]
        view.imported = out.imported
        if view.subagent:
            title = f"subagent {view.subagent.rsplit('/', 1)[-1]}"
        else:
            title = sv.view_title(out.messages, Path(view.source).name or out.title)
        view.title = title
        return replace(out, title=title, read_only=True, source=view.describe())

    async def _leave_session(self) -> None:
        await self.tasks.cancel_and_wait("follow")
        await super()._leave_session()
        view, self._view = self._view, None
        if view is not None:
            if view.tail is not None:
                self.emit(FollowChanged(False, "", False))
            await asyncio.to_thread(sv.remove_view, view.root)

    # ------------------------------------------------------------------ following

    async def _follow(self, view: sv.SourceView) -> None:
        log = view.log
        assert log is not None
        if self._wake is None:
            self._wake = asyncio.Event()
        wake = self._wake  # a change noticed before this loop began is already set: not lost
        while self._view is view:
            try:
                await asyncio.wait_for(wake.wait(), FOLLOW_INTERVAL)
            except TimeoutError:
                pass
            wake.clear()
            got, reset, live = await asyncio.to_thread(sv.poll_log, log)
            if self._view is not view:
                return
            if got or reset:
                await self._refresh(view, reset)
            if live != view.live:
                view.live = live
                self.emit(FollowChanged(True, view.source, live))

    async def _refresh(self, view: sv.SourceView, reset: bool) -> None:
        """Bring the view up to date with the file (see the module docstring)."""
        stable = view.root
        assert stable is not None
        fresh = sv.new_view_folder(stable.parent)
        try:
            await asyncio.to_thread(sv.import_view, Path(view.source), fresh, view.prefix, self.settings,
                                    view.log, self._model_info())
        except Exception as exc:  # e.g. truncated to nothing: wait for the next lines
            sv.remove_folder(fresh)
            self.notice("warning", f"following {Path(view.source).name}: {one_line(str(exc))}")
            return
        if self._view is not view or self.session is None:
            sv.remove_folder(fresh)
            return
        old = sv.swap_folders(stable, fresh)  # the view keeps its path (the inspector, Export use it)
        try:
            session = await asyncio.to_thread(Session.load, stable, estimator=self._estimator())
        except (SessionError, OSError) as exc:
            self.notice("warning", f"following {Path(view.source).name}: {one_line(str(exc))}")
            return
        finally:
            await asyncio.to_thread(sv.remove_folder, old)
        if self._view is not view or self.session is None:
            session.close()
            return
        old_session = self.session
        shown = list(zip(view.message_ids, view.message_keys, strict=True))
        shown_calls, shown_compactions, shown_imported = view.call_keys, view.compaction_keys, view.imported
        self.session = session
        self._make_agent()
        out = self.session_view()
        old_session.close()
        same = sv.common_prefix(shown, list(zip(view.message_ids, view.message_keys, strict=True)))
        incremental = (not reset and len(shown) - same <= MAX_RETRACTED and sv.is_prefix(shown_calls, view.call_keys)
                       and sv.is_prefix(shown_compactions, view.compaction_keys))
        if not incremental:
            self.emit(SessionLoaded(out))
            return
        if same < len(shown):
            self.emit(MessagesRetracted([key for key, _ in shown[same:]]))
        for msg in out.messages[same:]:
            self.emit(MessageAdded(msg, out.state.tokens.get(str(msg.get("id")), 0)))
        for record in out.timeline[len(shown_calls):]:
            self.emit(CallRecorded(record))
        view.compaction_keys = shown_compactions + self._new_markers(out, len(shown_compactions))
        if len(out.timeline) > len(shown_calls):
            self.emit(LastCall(*out.last_call))
        if out.imported != shown_imported:
            self.emit(ImportChanged(out.imported))
        self.emit(ContextStateChanged(out.state))
        self.emit(SnapshotChanged(out.state.snapshot))

    def _new_markers(self, out: SessionView, shown: int) -> list[str]:
        """Send the compactions after the first ``shown`` (each once its ``tokens_after`` is known: the
        first call after it; it waits until then); their keys."""
        sent = []
        for event, marker in list(zip(sv.shown_compactions(out.compactions), out.markers, strict=False))[shown:]:
            if event.get("tokens_after") is None:
                break
            self.emit(CompactionFinished(marker))
            sent.append(sv.compaction_key(event))
        return sent

    # ------------------------------------------------------------------ continue, subagents

    def continue_source(self, path: str | Path | None = None) -> asyncio.Task[Any] | None:
        """Fork ``path`` (default: the open view's file) into a normal ctxbench session (see the module
        docstring)."""
        view = self._view
        if path is None and (view is None or not view.source):
            self.notice("warning", "no agent session is open to continue")
            return None
        return self.tasks.spawn("import", self._continue(Path(path or view.source)))  # type: ignore[union-attr]

    async def _continue(self, path: Path) -> None:
        await self._import(path)
        if self._view is None and self.session is not None:
            self.offer_compaction()

    def offer_compaction(self) -> bool:
        """Open the compaction preview when the next request is over the configured model's window."""
        snap, agent = self.next_snapshot(), self.agent
        if snap is None or agent is None:
            return False
        window = agent.window.context_window
        if snap.prompt <= window:
            return False
        self.notice("warning", f"the next request ({snap.prompt:,} tokens) is over the {window:,}-token window "
                               f"of {self.settings.model}: compact it before you send")
        return self.start_preview()

    def open_subagent(self, rel: str) -> asyncio.Task[Any] | None:
        """Open the subagent session ``rel`` (``subagents/<id>``) of the open session, read-only."""
        session = self.session
        if session is None or not rel or ".." in Path(rel).parts or Path(rel).is_absolute():
            self.notice("warning", f"no subagent session {rel!r} here")
            return None
        folder = session.path / rel
        if not (folder / "history.jsonl").exists():
            self.notice("warning", f"no subagent session {rel!r} here")
            return None
        return self.tasks.spawn("open", self._open_subagent(folder, rel), replace=True)

    async def _open_subagent(self, folder: Path, rel: str) -> None:
        old, session = self._view, self.session
        assert session is not None
        if old is not None and old.source and not old.subagent:
            parent: dict[str, Any] = {"kind": "source", "path": old.source, "title": old.title or session.title}
        elif old is not None:
            parent = dict(old.parent)
        else:
            parent = {"kind": "session", "id": session.id, "title": session.title}
        source = sv.subagent_file(session.path, rel)
        root = old.root if old is not None else None
        self._view = None  # the parent's folder holds the child: it stays until the child is left
        await self._leave_session()
        try:
            child = await asyncio.to_thread(Session.load, folder, estimator=self._estimator())
        except (SessionError, OSError) as exc:
            sv.remove_view(root)
            self.notice("error", f"cannot open the subagent {rel}: {one_line(str(exc))}")
            return
        view = sv.SourceView(root, folder, source, "claude-code" if source else "", "", parent=parent, subagent=rel)
        self._show_view(view, child)

    def open_parent(self) -> asyncio.Task[Any] | None:
        """Back from a subagent view to the session it ran in."""
        view = self._view
        parent = view.parent if view is not None else {}
        if parent.get("kind") == "source":
            return self.open_source(str(parent["path"]))
        if parent.get("kind") == "session":
            return self.tasks.spawn("open", self._open_session(str(parent["id"])), replace=True)
        self.notice("warning", "this view has no parent session")
        return None

    # ------------------------------------------------------------------ refused on a view

    def _refuse(self) -> bool:
        if self._view is None:
            return False
        self.notice("warning", READ_ONLY)
        return True

    def send(self, text: str) -> bool:
        return False if self._refuse() else super().send(text)

    def run_command(self, name: str, arg: str = "") -> None:
        if name in ("new", "context") or not self._refuse():
            super().run_command(name, arg)

    def clear_session(self) -> asyncio.Task[Any] | None:
        return None if self._refuse() else super().clear_session()

    def start_preview(self, instruction: str = "") -> bool:
        return False if self._refuse() else super().start_preview(instruction)

    def regenerate_preview(self, instruction: str = "") -> None:
        if not self._refuse():
            super().regenerate_preview(instruction)

    def apply_preview(self, summary: str | None = None) -> asyncio.Task[Any] | None:
        return None if self._refuse() else super().apply_preview(summary)

    def undo_compaction(self, marker_id: str | None = None) -> asyncio.Task[Any] | None:
        return None if self._refuse() else super().undo_compaction(marker_id)

    def restore_messages(self, ids: list[str]) -> asyncio.Task[Any] | None:
        return None if self._refuse() else super().restore_messages(ids)


__all__ = ["FOLLOW_INTERVAL", "READ_ONLY", "SCAN_INTERVAL", "Sources", "source_dict"]
