"""The Workbench service (Qt-free): :class:`Workbench` and its typed events and view models.

:class:`Workbench` (service) holds its parts, each with the state it owns, on one shared core: core
(settings, store, open session or view, the agent, snapshots, the read-only policy), sessions, turns
(send/stop, engine events → service events), compaction_ui (preview/apply/undo/clear/restore),
sources (read-only views, follow), inspector, analysis, keys (settings, API keys), commands (slash
commands). Around them: policy (the read-only rule), tasks (named cancellable tasks), approvals
(futures), throttle (the one snapshot throttle), views (SessionView, ContextState, Marker), events
(typed events out). The package imports its modules when they are asked for (``ctxbench follow``
needs none of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.workbench.service import Workbench
    from engine.workbench.views import ContextState, Marker, SessionView

__all__ = ["ContextState", "Marker", "SessionView", "Workbench"]


def __getattr__(name: str) -> Any:
    if name == "Workbench":
        from engine.workbench.service import Workbench

        return Workbench
    if name in ("ContextState", "Marker", "SessionView"):
        from engine.workbench import views

        return getattr(views, name)
    raise AttributeError(f"module 'engine.workbench' has no attribute {name!r}")
