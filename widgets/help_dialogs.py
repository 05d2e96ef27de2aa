"""Help → About and Help → Keyboard shortcuts: two small non-modal dialogs that show what they are given.

Public API
----------
:class:`AboutDialog` ``(parent, facts)``
    ``facts``: ``version``, ``versions`` (runtime line), and ``places`` — (what, path) pairs: where the
    settings, the sessions, the window layout … live. Each path is selectable text with a "Copy" button.
    ``text() -> str``: everything shown, as plain text (tests).
:class:`ShortcutsDialog` ``(parent, rows)``
    ``rows``: (keys, what it does) pairs, shown as a two-column table. ``rows() -> list[tuple[str, str]]``.
Both are shown with ``open()`` (never ``exec()``: the app runs in an async loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)


@dataclass(frozen=True)
class AboutFacts:
    version: str
    versions: str = ""
    places: Sequence[tuple[str, str]] = field(default_factory=tuple)
    agents: str = ""  # the agents whose sessions it reads, as a sentence lists them ("Claude Code, Codex and …")


class AboutDialog(QDialog):
    """See the module docstring."""

    def __init__(self, parent: QWidget | None, facts: AboutFacts) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Context Workbench")
        self.facts = facts
        layout = QVBoxLayout(self)
        title = QLabel(f"<b>Context Workbench</b> (ctxbench) {facts.version}")
        title.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(title)
        blurb = QLabel("See and control what fills an LLM agent's context window, and what it cost — for its own "
                       + (f"agent and for the sessions of {facts.agents}." if facts.agents else "agent."))
        blurb.setWordWrap(True)
        layout.addWidget(blurb)
        if facts.versions:
            runtime = QLabel(facts.versions)
            runtime.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            layout.addWidget(runtime)
        grid = QGridLayout()
        self.copy_buttons: list[QPushButton] = []
        for row, (what, path) in enumerate(facts.places):
            grid.addWidget(QLabel(what), row, 0, Qt.AlignmentFlag.AlignTop)
            value = QLabel(path)
            value.setTextFormat(Qt.TextFormat.PlainText)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setWordWrap(True)
            grid.addWidget(value, row, 1)
            button = QPushButton("Copy")
            button.setToolTip(f"Copy the path of the {what.lower()}")
            button.clicked.connect(lambda _checked=False, p=path: QGuiApplication.clipboard().setText(p))
            grid.addWidget(button, row, 2, Qt.AlignmentFlag.AlignTop)
            self.copy_buttons.append(button)
        grid.setColumnStretch(1, 1)
        layout.addLayout(grid)
        note = QLabel("Every setting can also be set by an environment variable CTXBENCH_<NAME>; "
                      "CTXBENCH_CONFIG_DIR and CTXBENCH_DATA_DIR move the folders.")
        note.setWordWrap(True)
        layout.addWidget(note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self.resize(640, self.sizeHint().height())

    def text(self) -> str:
        lines = [f"Context Workbench (ctxbench) {self.facts.version}", self.facts.versions]
        lines += [f"{what}: {path}" for what, path in self.facts.places]
        return "\n".join(line for line in lines if line)


class ShortcutsDialog(QDialog):
    """See the module docstring."""

    def __init__(self, parent: QWidget | None, rows: Sequence[tuple[str, str]]) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self._rows = [(str(k), str(w)) for k, w in rows]
        layout = QVBoxLayout(self)
        self.table = QTableWidget(len(self._rows), 2)
        self.table.setHorizontalHeaderLabels(["Keys", "Does"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        for row, (keys, what) in enumerate(self._rows):
            self.table.setItem(row, 0, QTableWidgetItem(keys))
            self.table.setItem(row, 1, QTableWidgetItem(what))
        layout.addWidget(self.table)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self.resize(560, 520)

    def rows(self) -> list[tuple[str, str]]:
        return list(self._rows)


__all__ = ["AboutDialog", "AboutFacts", "ShortcutsDialog"]
