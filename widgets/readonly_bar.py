"""The line above the chat input while a read-only view is open: what it is a view of, whether it is
followed live, and the actions (Continue in ctxbench, ← parent for a subagent).

Public API of :class:`ReadOnlyBar`
----------------------------------
Signals:
    continue_requested()     fork the view into a ctxbench session
    parent_requested()       back from a subagent to the session it ran in
Methods:
    set_view(source, title)  show the bar for ``SessionView.source`` (a ViewSource; None hides it)
    set_following(following, live)  the file is (no longer) followed; live: the agent is writing it
    text() -> str            the line shown (tests)
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from engine.workbench.rows import ViewSource


class ReadOnlyBar(QFrame):
    """See the module docstring."""

    continue_requested = Signal()
    parent_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ReadOnlyBar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 4, 4)
        self.parent_button = QPushButton("← Parent")
        self.parent_button.setToolTip("Back to the session this subagent ran in")
        self.live_label = QLabel()
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.continue_button = QPushButton("Continue in ctxbench")
        self.continue_button.setToolTip("Import it as a ctxbench session you can talk to, with the model of the "
                                        "settings (the compaction preview opens when it is over that window)")
        row.addWidget(self.parent_button)
        row.addWidget(self.live_label)
        row.addWidget(self.label, 1)
        row.addWidget(self.continue_button)
        self.parent_button.clicked.connect(self.parent_requested)
        self.continue_button.clicked.connect(self.continue_requested)
        self.hide()

    def set_view(self, source: ViewSource | None, title: str = "") -> None:
        if source is None:
            self.hide()
            return
        agent = source.agent or "another agent"
        name = Path(source.path).name or title
        if source.subagent:
            line = f"Read-only view of subagent {source.subagent.split('/')[-1]} of {source.parent or 'its session'}"
        else:
            short = name if len(name) <= 24 else name[:12] + "…" + name[-8:]
            line = f"Read-only view of {agent} session {short}"
        if source.path:
            line += " — Continue in ctxbench to talk to it"
        self.label.setText(line)
        self.label.setToolTip(source.path)
        self.parent_button.setVisible(source.parent is not None)
        self.continue_button.setVisible(bool(source.path))
        self.set_following(source.following, source.live)
        self.show()

    def set_following(self, following: bool, live: bool = False) -> None:
        self.live_label.setText(("● live" if live else "○ following") if following else "")
        self.live_label.setToolTip(
            ("The agent is writing this session: " if live else "")
            + "new lines appear here as they are written" if following else "")
        self.live_label.setStyleSheet("color: #2e9d4f; font-weight: bold;" if live else "color: gray;")
        self.live_label.setVisible(following)

    def text(self) -> str:
        return " ".join(t for t in (self.live_label.text(), self.label.text()) if t)


__all__ = ["ReadOnlyBar"]
