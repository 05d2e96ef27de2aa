"""The Workbench service (Qt-free): :class:`Workbench` and its typed events and view models.

Modules: core (shared state, the agent, snapshots), sessions, turns (send/stop, engine events →
service events), compaction_ui (preview/apply/undo/clear/restore), inspector, keys (settings, API
keys), commands (slash commands), tasks (named cancellable tasks), approvals (futures), throttle
(the one snapshot throttle), views (SessionView, ContextState, Marker), events (typed events out).
"""

from engine.workbench.service import Workbench
from engine.workbench.views import ContextState, Marker, SessionView

__all__ = ["ContextState", "Marker", "SessionView", "Workbench"]
