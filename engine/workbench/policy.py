"""The read-only rule, in one place: what the service refuses while a source view is open.

A read-only view (:mod:`engine.workbench.sources`) is another agent's session: nothing may change it.
Every intent that would (:data:`MUTATING_INTENTS`) asks :meth:`ReadOnlyPolicy.refuses` first; the
policy says no (with a notice saying why) while a view is open. Slash commands that change nothing
of the open session (:data:`READ_ONLY_COMMANDS`: ``/new`` leaves it, ``/context`` reads it) pass.
"""

from __future__ import annotations

from collections.abc import Callable

READ_ONLY = "this is a read-only view of another agent's session: use Continue in ctxbench to talk to it"

MUTATING_INTENTS = frozenset({
    "send",
    "run_command",
    "clear_session",
    "start_preview",
    "regenerate_preview",
    "apply_preview",
    "undo_compaction",
    "restore_messages",
})
READ_ONLY_COMMANDS = frozenset({"new", "context"})  # allowed on a view: they change nothing of it


class ReadOnlyPolicy:
    """Refuses the mutating intents while ``read_only()`` holds, with a warning through ``warn``."""

    def __init__(self, read_only: Callable[[], bool], warn: Callable[[str], None]) -> None:
        self._read_only = read_only
        self._warn = warn

    def refuses(self, intent: str, command: str | None = None) -> bool:
        """True (and a warning) when ``intent`` (``run_command``: with that ``command``) is refused now."""
        if intent not in MUTATING_INTENTS:
            raise ValueError(f"{intent!r} is not an intent the read-only policy knows")
        if not self._read_only():
            return False
        if intent == "run_command" and command in READ_ONLY_COMMANDS:
            return False
        self._warn(READ_ONLY)
        return True


__all__ = ["MUTATING_INTENTS", "READ_ONLY", "READ_ONLY_COMMANDS", "ReadOnlyPolicy"]
