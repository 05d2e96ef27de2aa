"""Slash commands (``/compact``, ``/new``, ``/clear``, ``/context``) and the ``/context`` report."""

from __future__ import annotations

from engine.context.budget import ContextSnapshot
from engine.workbench.compaction_ui import CompactionUI
from engine.workbench.sessions import Sessions

COMMANDS = ("compact", "new", "clear", "context")


def context_report(snap: ContextSnapshot | None) -> str:
    """What fills the next request, one line per region (for /context)."""
    if snap is None:
        return "no session is open"
    w = snap.window or 1
    rows = [
        ("System prompt", snap.system),
        ("Summary", snap.summary),
        ("History · user", snap.history_user),
        ("History · assistant", snap.history_assistant),
        ("History · tool results", snap.history_tool),
        ("Tool definitions", snap.tools),
        ("Output reserve", snap.reserve),
        ("Free", snap.free),
    ]
    lines = [
        f"Context: {snap.used:,} of {snap.window:,} tokens ({100 * snap.used / w:.1f}%, {snap.accuracy}); "
        f"compaction at {snap.threshold_tokens:,}"
    ]
    lines += [f"  {label}: {n:,} ({100 * n / w:.1f}%)" for label, n in rows]
    if snap.overflow:
        lines.append(f"  Over the window by {snap.overflow:,} tokens")
    return "\n".join(lines)


class Commands(Sessions, CompactionUI):
    """The slash-command part of the service."""

    def run_command(self, name: str, arg: str = "") -> None:
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
