"""File → Export: the chart as PNG or SVG, the session as Markdown, the provider calls as CSV or JSON.

Each action opens a non-modal save dialog (``QFileDialog.open()``, never ``exec()``: the app's slots
run in a qasync loop) proposing a name beside the last folder used; choosing a file writes it
atomically. The chart comes from ``ContextChart.export_image`` (pyqtgraph's exporters, the timeline
as drawn: region or cache view); Markdown / CSV / JSON from :mod:`engine.export`, reading the session
folder (no lock needed), with the message tokens the chat shows. A problem is shown in the notice bar;
success in the status bar.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMenu

from engine.export import ExportError, export_session, write_file

# kind → (menu text, name filter, file name suffix after the session id)
KINDS: dict[str, tuple[str, str, str]] = {
    "png": ("Chart as &PNG…", "PNG image (*.png)", "-chart.png"),
    "svg": ("Chart as &SVG…", "SVG image (*.svg)", "-chart.svg"),
    "md": ("Session as &Markdown…", "Markdown (*.md)", ".md"),
    "csv": ("Calls as &CSV…", "CSV (*.csv)", "-calls.csv"),
    "json": ("Calls as &JSON…", "JSON (*.json)", "-calls.json"),
}


class ExportMenu(QObject):
    """The File → Export submenu of the main window and what its actions do."""

    exported = Signal(str, str)  # kind, path written

    def __init__(self, window: Any, menu: QMenu) -> None:
        super().__init__(window)
        self._window = window
        self.menu = menu.addMenu("&Export")
        self.actions: dict[str, QAction] = {}
        for kind, (text, _, _) in KINDS.items():
            action = QAction(text, window)
            action.triggered.connect(partial(self.choose, kind))
            self.menu.addAction(action)
            self.actions[kind] = action
        self.dialog: QFileDialog | None = None
        self.directory = Path.home()
        self._view: Any = None  # app.controller.SessionView of the open session
        self.set_session(None)

    def set_session(self, view: Any) -> None:
        """The open session (a SessionView), or None: the actions are enabled only with one."""
        self._view = view
        for action in self.actions.values():
            action.setEnabled(view is not None)

    def default_path(self, kind: str) -> Path:
        name = self._view.id if self._view is not None else "session"
        return self.directory / f"{name}{KINDS[kind][2]}"

    def choose(self, kind: str, _checked: bool = False) -> QFileDialog | None:
        """Show the save dialog for ``kind`` (non-modal) and return it."""
        if self._view is None:
            return None
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        text, name_filter, suffix = KINDS[kind]
        dialog = QFileDialog(self._window, text.replace("&", "").rstrip("…"), str(self.default_path(kind)))
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilter(name_filter)
        dialog.setDefaultSuffix(suffix.rsplit(".", 1)[-1])
        dialog.selectFile(str(self.default_path(kind)))
        dialog.fileSelected.connect(partial(self._on_dialog_file_selected, kind))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _on_dialog_file_selected(self, kind: str, path: str) -> None:
        self.write(kind, Path(path))

    def write(self, kind: str, path: Path) -> Path | None:
        """Export ``kind`` of the open session to ``path``; the path written, or None on a problem."""
        view = self._view
        if view is None:
            return None
        try:
            if kind in ("png", "svg"):
                write_file(path, self._window.ensure_chart().export_image(kind))
            else:
                session = getattr(self._window.controller, "session", None)
                estimator = session.estimator if session is not None and not session.closed else None
                export_session(view.path, kind, path, estimator=estimator, known=view.state.tokens)
        except (OSError, ExportError, ValueError) as exc:
            self._window.show_notice("error", f"cannot export to {path}: {exc}")
            return None
        self.directory = path.parent
        self._window.status.showMessage(f"exported {KINDS[kind][0].replace('&', '').rstrip('…')} to {path}", 8000)
        self.exported.emit(kind, str(path))
        return path


__all__ = ["KINDS", "ExportMenu"]
