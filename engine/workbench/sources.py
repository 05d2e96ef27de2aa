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
- **Following** (Claude Code, Codex and Gemini CLI files, OpenCode sessions:
  :data:`engine.workbench.source_views.LIVE_FORMATS`): the file is read once, when the view opens, through
  the format's incremental reader (:class:`engine.workbench.source_views.LiveSource`; a Claude Code file
  above 16 MB shows its context since the last compaction first); then, woken by the window's file
  watcher or every :data:`FOLLOW_INTERVAL` s (at most every :data:`MIN_POLL_GAP` s), a worker thread reads
  only what was appended and works out what changes in the view folder
  (:class:`engine.ingest.LiveImport`); that plan is written on the loop and only the difference is sent:
  ``MessagesRetracted`` + ``MessageAdded`` for a message that grew, ``MessageAdded`` for new ones,
  ``CallRecorded`` for new calls, ``CallUpdated`` for the last call's new figures,
  ``CompactionFinished`` for a Codex or Gemini CLI compaction (once the call after it is there),
  ``LastCall``, ``ImportChanged`` (the agent's own cost), then ``ContextStateChanged`` and
  ``SnapshotChanged``. A Claude Code compaction, a rewind into what is shown or a reset writes the folder
  again from the reader's session in memory (never the file) and sends the view whole (``SessionLoaded``).
- **Continue in ctxbench** imports the source as a normal session (the same path as File → Open) and
  opens it; when its next request is over the window of the model now configured, the compaction
  preview is opened.
- **Subagents**: ``open_subagent(rel)`` opens ``<open session>/<rel>`` (an imported Task subagent)
  read-only; ``open_parent()`` goes back (the source is read again, or the session reopened).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.context.conversation import Session
from engine.context.tokens import FOLLOW_MEMO
from engine.model.events import AgentState, MessageAdded, StateChanged
from engine.model.records import ContextRecord, context_records
from engine.sources.formats import agent_format, display_name
from engine.sources.model import SourceError, shown_path
from engine.store.session import SessionError
from engine.usage.costs import priced_call
from engine.workbench import source_views as sv
from engine.workbench.compaction_ui import CompactionPart
from engine.workbench.core import WorkbenchCore, one_line
from engine.workbench.display import Display
from engine.workbench.document import OpenDocument
from engine.workbench.events import (
    CallRecorded,
    CallUpdated,
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
from engine.workbench.imported import import_facts
from engine.workbench.policy import READ_ONLY
from engine.workbench.rows import ProblemRow, SourceRow
from engine.workbench.runtime import LlmRuntime
from engine.workbench.sessions import SessionsPart
from engine.workbench.views import markers

if TYPE_CHECKING:
    from engine.sources.discovery import ScanProblem
    from engine.sources.entry import SourceEntry

log = logging.getLogger(__name__)

FOLLOW_INTERVAL = 0.25  # seconds between two looks at a followed file
MIN_POLL_GAP = 0.25  # at most 4 looks a second when the file watcher wakes the loop on every written line
FAILING_INTERVAL = 5.0  # seconds between two polls at most, while every poll of a followed file fails
SCAN_INTERVAL = 30.0  # seconds between two scans of the sources


def source_row(entry: SourceEntry, now: float | None = None) -> SourceRow:
    """A Sources-panel row: the discovery entry's fields, ``agent_name`` (its display name) and ``live``."""
    return SourceRow(agent=entry.agent, path=entry.path, agent_name=display_name(entry.agent), project=entry.project,
                     session_id=entry.session_id, started=entry.started, last_activity=entry.last_activity,
                     calls=entry.calls, last_prompt_tokens=entry.last_prompt_tokens, window=entry.window,
                     percent_full=entry.percent_full, model=entry.model, title=entry.title,
                     agent_cost_usd=entry.agent_cost_usd, live=sv.is_live(entry.path, now))


def problem_row(problem: ScanProblem) -> ProblemRow:
    """A file the scan could not read, for the Sources panel (the path printable as ``shown``)."""
    return ProblemRow(agent=problem.agent, path=problem.path, shown=shown_path(problem.path), reason=problem.reason)


class SourcesPart:
    """The sources part of the service (see the module docstring): it is given the core (events, tasks), the
    open document (which holds the open view, :attr:`OpenDocument.view`), the runtime (the model's info, the
    estimator), the display, the sessions part (a view is opened, loaded and left as a session is) and the
    compaction part (Continue may open the preview). It owns the scan's and the follow loop's state."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument, runtime: LlmRuntime, display: Display,
                 sessions: SessionsPart, compaction: CompactionPart) -> None:
        self.core = core
        self.doc = doc
        self.runtime = runtime
        self.display = display
        self.sessions = sessions
        self.compaction = compaction
        self._views_cleaned = False
        self._wake: asyncio.Event | None = None  # set by file_changed: look at the followed file now

    def reread_observed_view(self) -> None:
        """A view opened before litellm was loaded whose file names no window (SWE-agent, OpenHands)
        settled on the window it observed: read it again now that the model's window can be looked up."""
        view, session = self.doc.view, self.doc.session
        if not self.runtime.llm_ready or view is None or view.root is None or view.subagent or not view.source:
            return
        imported = session.meta.get("import") if session is not None else None
        if isinstance(imported, dict) and imported.get("window_source") == "observed":
            self.open_source(view.source)

    def file_changed(self, path: str) -> None:
        """A file watcher (the window's QFileSystemWatcher) saw ``path`` change: when it is the
        followed file, look now instead of at the next poll (polling stays as the fallback for
        file systems that send no notifications)."""
        view = self.doc.view
        if view is not None and view.live_source is not None and path == view.source:
            if self._wake is None:
                self._wake = asyncio.Event()  # before the follow loop's first wait: it sees it set
            self._wake.set()

    def remove_stale_views(self) -> None:
        """The view folders a crash left behind are removed (in a worker thread; at start-up)."""
        self._views_cleaned = True
        self.core.tasks.spawn("views-cleanup", asyncio.to_thread(sv.remove_stale_views, sv.views_root()), queue=True)

    # ------------------------------------------------------------------ scanning

    def scan_sources(self, refresh: bool = False) -> asyncio.Task[Any]:
        return self.core.tasks.spawn("sources", self._scan(refresh), replace=True)

    async def _scan(self, refresh: bool) -> list[SourceRow]:
        from engine.sources.discovery import scan_sources

        problems: list[ScanProblem] = []
        entries = await asyncio.to_thread(scan_sources, self.core.settings, refresh=refresh, problems=problems)
        rows = [source_row(e) for e in entries]
        self.core.emit(SourcesListed(rows, [problem_row(p) for p in problems]))
        return rows

    def start_source_scans(self, interval: float = SCAN_INTERVAL) -> asyncio.Task[Any]:
        """Scan now and every ``interval`` seconds (until shutdown)."""
        return self.core.tasks.spawn("sources-watch", self._scan_loop(interval), replace=True)

    async def _scan_loop(self, interval: float) -> None:
        while True:
            try:
                await self._scan(False)
            except OSError as exc:
                self.core.notice("warning", f"cannot scan the agent sessions: {one_line(str(exc))}")
            await asyncio.sleep(interval)

    # ------------------------------------------------------------------ views

    def open_source(self, path: str | Path) -> asyncio.Task[Any]:
        return self.core.tasks.spawn("open", self._open_source(Path(path)), replace=True)

    async def _open_source(self, path: Path) -> None:
        await self.sessions.leave()
        await self.runtime.prepare_counting()
        root = sv.views_root()
        if not self._views_cleaned:
            self._views_cleaned = True
            await asyncio.to_thread(sv.remove_stale_views, root)
        self.core.emit(StateChanged(AgentState.IMPORTING))
        log.info("opening %s", path)
        folder, prefix = sv.new_view_folder(root), sv.new_prefix()
        live: sv.LiveSource | None = None
        try:
            fmt = await asyncio.to_thread(sv.format_of, path)
            if agent_format(fmt).first_screen and path.stat().st_size > sv.PROGRESSIVE_BYTES:
                await self._first_screen(path, root, prefix, fmt)
            if fmt in sv.LIVE_FORMATS:  # read once through the format's incremental reader, then what is appended
                live = sv.LiveSource(path, fmt, prefix, self.core.settings, self.runtime.model_info())
                await asyncio.to_thread(live.open, folder)
            else:
                fmt = await asyncio.to_thread(sv.import_view, path, folder, prefix, self.core.settings,
                                          self.runtime.model_info())
            session = await asyncio.to_thread(Session.load, folder, estimator=self.runtime.estimator(imported=True))
            if live is not None:
                live.prime(session)
                session.ledger.follow(FOLLOW_MEMO)  # (its messages come as new dicts: no key of each kept)
        except Exception as exc:  # a reader's SourceError, TranscriptError, OSError…: the view cannot be made
            log.warning("opening %s failed", path, exc_info=exc)
            sv.remove_view(folder)
            self.core.emit(StateChanged(self.core.state))
            self.core.notice("error", f"cannot open {path.name}: {one_line(str(exc))}")
            return
        if self.doc.view is not None:  # the first screen of a large file: the whole view takes its place
            await self.sessions.leave()
        self.core.emit(StateChanged(self.core.state))
        view = sv.SourceView(folder, folder, str(path), fmt, prefix, live.tail if live else None,
                             live_source=live, live=sv.is_live(path))
        self._show_view(view, session)
        if view.tail is not None:
            self.core.tasks.spawn("follow", self._follow(view), replace=True)
            self.core.emit(FollowChanged(True, view.source, view.live))

    async def _first_screen(self, path: Path, root: Path, prefix: str, fmt: str) -> None:
        """A large file: its current context is shown first (read from the end of the file), while the whole
        file is read; the full view replaces it when ready."""
        folder = sv.new_view_folder(root)
        try:
            made = await asyncio.to_thread(sv.preview_view, path, folder, prefix, self.core.settings,
                                           self.runtime.model_info())
            session = (await asyncio.to_thread(Session.load, folder, estimator=self.runtime.estimator(imported=True))
                       if made else None)
        except Exception:  # the first screen is a courtesy: the whole read below says what is wrong, if anything
            log.info("first screen of %s not made", path, exc_info=True)
            sv.remove_view(folder)
            return
        if session is None:
            sv.remove_view(folder)
            return
        self._show_view(sv.SourceView(folder, folder, str(path), fmt, prefix, live=sv.is_live(path)), session)
        self.core.notice("info", f"{path.name}: the context since its last compaction; reading the whole file…")
        await asyncio.sleep(0)  # let the window paint it

    def _show_view(self, view: sv.SourceView, session: Session) -> None:
        self.sessions.load(session, view)

    # ------------------------------------------------------------------ following

    async def _follow(self, view: sv.SourceView) -> None:
        live = view.live_source
        assert live is not None
        if self._wake is None:
            self._wake = asyncio.Event()
        wake = self._wake  # a change noticed before this loop began is already set: not lost
        loop = asyncio.get_running_loop()
        last = 0.0
        failing = ""  # the last poll's error ("" when it read well): said once, polls back off, then one rewrite
        interval = FOLLOW_INTERVAL
        while self.doc.view is view:
            try:
                if failing:  # backing off: a file growing line after line does not wake the loop sooner
                    await asyncio.sleep(interval)
                else:
                    await asyncio.wait_for(wake.wait(), interval)
            except TimeoutError:
                pass
            since = loop.time() - last
            if since < MIN_POLL_GAP:  # an agent writing line after line: one read for the lines of a moment
                await asyncio.sleep(MIN_POLL_GAP - since)
            wake.clear()
            last = loop.time()
            try:
                plan = await asyncio.to_thread(live.poll)
            except Exception as exc:  # a reader must never take the view down: say so once, try again later
                reason = one_line(str(exc))
                if reason != failing:  # once per new reason (a poll that keeps failing: not again)
                    log.warning("following %s: poll failed", view.source, exc_info=exc)
                    self.core.notice("warning", f"following {Path(view.source).name}: {reason}")
                failing, interval = reason, min(interval * 2, FAILING_INTERVAL)
                continue
            if self.doc.view is not view or self.doc.session is None:
                return
            if (gone := live.notice()) is not None:  # deleted, damaged, locked for long: said once
                self.core.notice("warning", f"following {shown_path(Path(view.source).name)}: {gone}; the view "
                                            "shows it as last read, and goes on when it can be read again")
                continue
            if plan is None or failing:  # a reset or rewind; or read well again after failed polls: the view is
                failing, interval = "", FOLLOW_INTERVAL  # written once from the reader's state
                await self._rewrite(view)
            elif not plan.empty:
                self._apply_followed(view, plan)
            is_live = await asyncio.to_thread(sv.is_live, view.source)
            if is_live != view.live:
                view.live = is_live
                self.core.emit(FollowChanged(True, view.source, is_live))

    def _apply_followed(self, view: sv.SourceView, plan: Any) -> None:
        """Write what the file gained into the open view and tell the window only that (see the module
        docstring): no re-import, no reload."""
        session, live = self.doc.session, view.live_source
        assert session is not None and live is not None
        try:
            live.importer.apply(session, plan)
        except (SessionError, OSError) as exc:
            self.core.notice("warning", f"following {Path(view.source).name}: {one_line(str(exc))}")
            return
        state = self.display.state_now()
        if plan.replaced:
            self.core.emit(MessagesRetracted([str(m.get("id")) for m in plan.replaced]))
        for msg in [*plan.replaced, *plan.added]:
            mid = str(msg.get("id"))
            tokens = state.tokens.get(mid)
            self.core.emit(MessageAdded(msg, session.estimator.message(msg) if tokens is None else tokens))
        if plan.updated is not None:
            self.core.emit(CallUpdated(priced_call(plan.updated)))
        for record in context_records(plan.records):  # the chart takes the records, priced
            self.core.emit(CallRecorded(priced_call(record)))
        if plan.compactions:  # (markers() places them among every message shown: not for each poll)
            for marker in markers(session, plan.compactions, list(live.session.messages), None):
                self.core.emit(CompactionFinished(marker))
        last = plan.records[-1] if plan.records else plan.updated
        if isinstance(last, ContextRecord):
            self.core.emit(LastCall(last.snapshot.prompt, last.provider_prompt_tokens))
        elif last is not None:  # a compaction came last: no call's figures yet
            self.core.emit(LastCall(0, None))
        if plan.meta is not None:
            facts = import_facts(session.meta)
            view.imported = facts
            self.core.emit(ImportChanged(facts))
        self.core.emit(ContextStateChanged(state))
        self.core.emit(SnapshotChanged(state.snapshot))

    async def _rewrite(self, view: sv.SourceView) -> None:
        """A compaction, a rewind into what the view holds, a reset: the view folder is written again from
        the reader's session in memory (never the file) and sent whole."""
        live, stable = view.live_source, view.root
        assert live is not None and stable is not None
        fresh = sv.new_view_folder(stable.parent)
        try:
            await asyncio.to_thread(live.rewrite, fresh)
        except Exception as exc:  # e.g. truncated to nothing: wait for the next lines
            log.warning("following %s: the view could not be written again", view.source, exc_info=exc)
            sv.remove_folder(fresh)
            self.core.notice("warning", f"following {Path(view.source).name}: {one_line(str(exc))}")
            return
        if self.doc.view is not view or self.doc.session is None:
            sv.remove_folder(fresh)
            return
        old = sv.swap_folders(stable, fresh)  # the view keeps its path (the inspector, Export use it)
        try:
            session = await asyncio.to_thread(Session.load, stable, estimator=self.runtime.estimator(imported=True))
            session.ledger.follow(FOLLOW_MEMO)
        except (SessionError, OSError) as exc:
            self.core.notice("warning", f"following {Path(view.source).name}: {one_line(str(exc))}")
            return
        finally:
            await asyncio.to_thread(sv.remove_folder, old)
        if self.doc.view is not view or self.doc.session is None:
            session.close()
            return
        old_session = self.doc.replace(session)
        out = self.sessions.session_view()
        old_session.close()
        self.core.emit(SessionLoaded(out))

    # ------------------------------------------------------------------ continue, subagents

    def continue_source(self, path: str | Path | None = None) -> asyncio.Task[Any] | None:
        """Fork ``path`` (default: the open view's file) into a normal ctxbench session (see the module
        docstring)."""
        view = self.doc.view
        if path is None and (view is None or not view.source):
            self.core.notice("warning", "no agent session is open to continue")
            return None
        return self.core.tasks.spawn("import", self._continue(Path(path or view.source)),  # type: ignore[union-attr]
                                     queue=True)

    async def _continue(self, path: Path) -> None:
        await self.sessions.import_and_open(path)
        if self.doc.view is None and self.doc.session is not None:
            self.offer_compaction()

    def offer_compaction(self) -> bool:
        """Open the compaction preview when the next request is over the configured model's window."""
        snap, agent = self.display.next_snapshot(), self.doc.agent
        if snap is None or agent is None:
            return False
        window = agent.window.context_window
        if snap.prompt <= window:
            return False
        self.core.notice("warning", f"the next request ({snap.prompt:,} tokens) is over the {window:,}-token "
                                    f"window of {self.core.settings.model}: compact it before you send")
        return self.compaction.start_preview()

    def open_subagent(self, rel: str) -> asyncio.Task[Any] | None:
        """Open the subagent session ``rel`` (``subagents/<id>``) of the open session, read-only."""
        session = self.doc.session
        if session is None or not rel or ".." in Path(rel).parts or Path(rel).is_absolute():
            self.core.notice("warning", f"no subagent session {rel!r} here")
            return None
        folder = session.path / rel
        if not (folder / "history.jsonl").exists():
            self.core.notice("warning", f"no subagent session {rel!r} here")
            return None
        return self.core.tasks.spawn("open", self._open_subagent(folder, rel), replace=True)

    async def _open_subagent(self, folder: Path, rel: str) -> None:
        old, session = self.doc.view, self.doc.session
        assert session is not None
        if old is not None and old.source and not old.subagent:
            parent: dict[str, Any] = {"kind": "source", "path": old.source, "title": old.title or session.title}
        elif old is not None:
            parent = dict(old.parent)
        else:
            parent = {"kind": "session", "id": session.id, "title": session.title}
        source = sv.subagent_file(session.path, rel)
        root = old.root if old is not None else None
        await self.sessions.leave(keep_view=True)  # the parent folder holds the child: kept until the child is left
        try:
            child = await asyncio.to_thread(Session.load, folder, estimator=self.runtime.estimator(imported=True))
        except (SessionError, OSError) as exc:
            sv.remove_view(root)
            self.core.notice("error", f"cannot open the subagent {rel}: {one_line(str(exc))}")
            return
        # a subagent's file is of its parent's format (a Claude Code Task's, a Codex spawn_agent thread's), else its own
        fmt = (old.format if old is not None and old.format else await asyncio.to_thread(_format_or_none, source)
               ) if source else ""
        view = sv.SourceView(root, folder, source, fmt, "", parent=parent, subagent=rel)
        self._show_view(view, child)

    def open_parent(self) -> asyncio.Task[Any] | None:
        """Back from a subagent view to the session it ran in."""
        view = self.doc.view
        parent = view.parent if view is not None else {}
        if parent.get("kind") == "source":
            return self.open_source(str(parent["path"]))
        if parent.get("kind") == "session":
            return self.core.tasks.spawn("open", self.sessions.reopen(str(parent["id"])), replace=True)
        self.core.notice("warning", "this view has no parent session")
        return None


__all__ = ["FOLLOW_INTERVAL", "READ_ONLY", "SCAN_INTERVAL", "SourcesPart", "problem_row", "source_row"]


def _format_or_none(path: str) -> str:
    """The format of the file at ``path``, "" when none fits (or it cannot be read)."""
    try:
        return sv.format_of(Path(path))
    except (SourceError, OSError):
        return ""

