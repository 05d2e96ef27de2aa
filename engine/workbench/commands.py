"""Slash commands (``/compact``, ``/new``, ``/clear``, ``/context``) and the ``/context`` report."""

from __future__ import annotations

from engine.model.snapshot import ContextSnapshot
from engine.model.snapshot import context_report as region_report
from engine.workbench.compaction_ui import CompactionUI
from engine.workbench.sessions import Sessions

COMMANDS = ("compact", "new", "clear", "context")


def context_report(snap: ContextSnapshot | None) -> str:
    """What fills the next request, one line per region (for /context)."""
    return "no session is open" if snap is None else region_report(snap)


class Commands(Sessions, CompactionUI):
    """The slash-command part of the service."""

    def run_command(self, name: str, arg: str = "") -> None:
        if self.refuse_if_read_only("run_command", name):
            return
        if name == "compact":
            self.start_preview(arg)
        elif name == "new":
            self.new_session()
        elif name == "clear":
            self.clear_session()
        elif name == "context":
            self.notice("info", self.context_report())
        else:
            self.notice("error", f"unknown command /{name}")

    def context_report(self) -> str:
        return context_report(self.next_snapshot())


__all__ = ["COMMANDS", "Commands", "context_report"]
