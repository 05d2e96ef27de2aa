"""The window's wiring of the analyses: the context diff, the Tools tab, the subagent marks.

:func:`wire_analysis` (one line in ``MainWindow.__init__``) returns an :class:`AnalysisWiring`;
``MainWindow.ensure_chart`` hands it the chart when the chart is built (:meth:`attach_chart`).

- The chart's ``diff_requested(a, b)`` (Shift/Ctrl-click a second column, or a column's context menu)
  → ``controller.diff_calls(a, b)`` → ``diff_ready`` → the non-modal :class:`widgets.diff_view.DiffDialog`;
  its message rows scroll the chat (``chat.scroll_to_message``), its summary row opens the compaction
  in the Compactions tab.
- A loaded session, a finished turn, a compaction and a call a followed file adds →
  ``controller.tool_attribution()`` → ``tools_ready`` → the inspector's Tools tab, tokens and dollars by
  tool (its links scroll the chat; archived results also open the Archive tab at their day). The
  attribution reads the whole session folder (25–40 MB of objects for a while at 30 MB), so it is asked for
  only while the Tools tab is on screen (its dock shown, the tab current); what changed while it was hidden
  is attributed when it is next shown.
- ``SessionView.imported`` (an imported session's system prompt and tool definitions) → the Tools tab's
  definitions section (again on ``imported_changed`` while a followed file grows).
- ``SessionView.subagents`` → ◆ marks on the chart; a click re-emits ``subagent_requested(str)``
  here with the subagent's ``session`` path, relative to the open session's folder (another part of
  the window opens it: connect to ``window.analysis.subagent_requested``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from engine.context.attribution import Attribution
    from engine.context.diff import ContextDiff
    from engine.usage.tool_costs import ToolCosts
    from engine.workbench.rows import SubagentMark
    from engine.workbench.views import SessionView
    from widgets.context_chart import ContextChart
    from widgets.diff_view import DiffDialog


class AnalysisWiring(QObject):
    """Connections between the controller, the chart, the diff dialog and the Tools tab."""

    subagent_requested = Signal(str)  # the subagent's session folder, relative to the open session's

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.controller = window.controller
        self.dialog: DiffDialog | None = None
        self.subagents: list[SubagentMark] = []
        c = self.controller
        c.session_loaded.connect(self._on_session_loaded)
        c.turn_finished.connect(self._tools_changed)
        c.compaction_finished.connect(self._tools_changed)
        c.call_recorded.connect(self._tools_changed)  # a followed view grew
        self._tools_stale = False  # changed while the Tools tab was hidden: attributed when it shows
        window.inspector.currentChanged.connect(self._on_tools_maybe_shown)
        window.inspector_dock.visibilityChanged.connect(self._on_tools_maybe_shown)
        self.subagent_requested.connect(c.open_subagent)  # its own chat and chart (engine.workbench.sources)
        c.diff_ready.connect(self.show_diff)
        c.tools_ready.connect(self._on_tools_ready)
        c.imported_changed.connect(window.inspector.tools.set_definitions)
        if window.chart is not None:
            self.attach_chart(window.chart)

    def attach_chart(self, chart: ContextChart) -> None:
        chart.diff_requested.connect(self.controller.diff_calls)
        chart.subagent_requested.connect(self.subagent_requested)
        chart.set_subagents(self.subagents)

    def _on_session_loaded(self, view: SessionView) -> None:
        self.subagents = list(view.subagents)
        if self.window.chart is not None:
            self.window.chart.set_subagents(self.subagents)
        self.window.inspector.tools.clear()
        self.window.inspector.tools.set_definitions(view.imported)
        if self.dialog is not None:
            self.dialog.hide()
        self._tools_changed()

    def tools_shown(self) -> bool:
        """Whether the Tools tab is on screen (its dock shown, the tab current)."""
        inspector = self.window.inspector
        return inspector.currentWidget() is inspector.tools and inspector.tools.isVisible()

    def _tools_changed(self, *_: Any) -> None:
        """The session changed (loaded, a turn, a compaction, a call of a followed file): the Tools tab attributed
        again now when it is on screen, else when it is next shown (the attribution reads the whole session folder:
        not for a tab nobody looks at)."""
        if self.tools_shown():
            self._tools_stale = False
            self.controller.tool_attribution()
        else:
            self._tools_stale = True

    def _on_tools_maybe_shown(self, *_: Any) -> None:
        if self._tools_stale and self.tools_shown():
            self._tools_stale = False
            self.controller.tool_attribution()

    def _on_tools_ready(self, attribution: Attribution, locations: dict[str, str], costs: ToolCosts | None) -> None:
        self.window.inspector.tools.set_attribution(attribution, locations, costs)

    def ensure_dialog(self) -> DiffDialog:
        if self.dialog is None:
            from widgets.diff_view import DiffDialog

            self.dialog = DiffDialog(self.window)
            self.dialog.view.message_activated.connect(self.window.chat.scroll_to_message)
            self.dialog.view.summary_activated.connect(self._on_summary_activated)
        return self.dialog

    def show_diff(self, diff: ContextDiff) -> None:
        dialog = self.ensure_dialog()
        dialog.set_diff(diff)
        dialog.show()
        dialog.raise_()

    def _on_summary_activated(self, index: int) -> None:
        """The compaction whose summary that is (the ``index``-th that put a summary in)."""
        done = [e for e in self.window.inspector.log.events if e.applied]  # summarized, replaced or dropped
        if 0 <= index < len(done):
            self.window.inspector.show_compaction(done[index])


def wire_analysis(window: Any) -> AnalysisWiring:
    """Wire the analyses into ``window`` (a MainWindow); see the module docstring."""
    return AnalysisWiring(window)


__all__ = ["AnalysisWiring", "wire_analysis"]
