"""Slash commands (``/compact``, ``/new``, ``/clear``, ``/context``) and the ``/context`` report."""

from __future__ import annotations

from engine.model.snapshot import ContextSnapshot
from engine.model.snapshot import context_report as region_report
from engine.workbench.compaction_ui import CompactionPart
from engine.workbench.core import WorkbenchCore
from engine.workbench.display import Display
from engine.workbench.document import OpenDocument
from engine.workbench.sessions import SessionsPart

COMMANDS = ("compact", "new", "clear", "context")


def context_report(snap: ContextSnapshot | None) -> str:
    """What fills the next request, one line per region (for /context)."""
    return "no session is open" if snap is None else region_report(snap)


class CommandsPart:
    """The slash-command part of the service: the commands are the sessions' and the compaction's intents."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument, display: Display, sessions: SessionsPart,
                 compaction: CompactionPart) -> None:
        self.core = core
        self.doc = doc
        self.display = display
        self.sessions = sessions
        self.compaction = compaction

    def run_command(self, name: str, arg: str = "") -> None:
        if self.doc.refuses("run_command", name):
            return
        if name == "compact":
            self.compaction.start_preview(arg)
        elif name == "new":
            self.sessions.new_session()
        elif name == "clear":
            self.compaction.clear_session()
        elif name == "context":
            self.core.notice("info", self.context_report())
        else:
            self.core.notice("error", f"unknown command /{name}")

    def context_report(self) -> str:
        return context_report(self.display.next_snapshot())


__all__ = ["COMMANDS", "CommandsPart", "context_report"]
