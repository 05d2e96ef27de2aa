"""File → Record an agent…: the recording proxy's dialog. It draws what it is told and emits intents; the proxy
itself runs elsewhere (engine.workbench.recording, wired by app.wire_record).

Public API
----------
:class:`RecordDialog` ``(parent)``, shown with ``open()`` (non-modal use: the app runs in an async loop).

Intents (signals): ``start_requested(port: int, upstream: str)`` (port 0: a free one; upstream "": each provider's
own address), ``stop_requested()``, ``open_requested(path: str)`` (open the capture in the window, followed live),
``closed()`` (the dialog was closed: the proxy stops with it).

Told: ``set_running(url, capture, setup_lines, upstreams)``, ``add_exchange(row)`` (``seq``, ``method``, ``path``,
``family``, ``status``, ``outcome``, ``prompt``, ``completion``, ``ms``), ``set_stopped(text)``,
``set_error(text)``. ``setup_text()``, ``exchange_rows()`` and ``status_text()`` return what is shown (tests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

COLUMNS = ("#", "request", "status", "prompt", "output", "ms")


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else ""


class RecordDialog(QDialog):
    """See the module docstring."""

    start_requested = Signal(int, str)
    stop_requested = Signal()
    open_requested = Signal(str)
    closed = Signal()

    def __init__(self, parent: QWidget | None = None, *, port: int = 8788) -> None:
        super().__init__(parent)
        self.setWindowTitle("Record an agent")
        self.resize(760, 560)
        self.capture = ""
        layout = QVBoxLayout(self)
        intro = QLabel("A recording proxy on 127.0.0.1 records every request an agent sends and the answer it gets "
                       "(credentials never written). Start it, point the agent at it, and follow the capture in "
                       "the window as the agent runs.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        self.port = QSpinBox()
        self.port.setRange(0, 65535)
        self.port.setValue(port)
        self.port.setSpecialValueText("a free one")
        self.port.setToolTip("The port on 127.0.0.1 (0: a free one)")
        form.addRow("Port", self.port)
        self.upstream = QLineEdit()
        self.upstream.setPlaceholderText("each provider's own address (api.anthropic.com, api.openai.com, …)")
        self.upstream.setToolTip("Send every request here instead (for a local or company gateway)")
        form.addRow("Upstream", self.upstream)
        layout.addLayout(form)
        buttons = QHBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self._on_start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop_requested.emit)
        self.open_button = QPushButton("Open in the window")
        self.open_button.setEnabled(False)
        self.open_button.setToolTip("Open the capture read-only, followed live while the proxy writes it")
        self.open_button.clicked.connect(lambda: self.open_requested.emit(self.capture))
        self.copy_button = QPushButton("Copy the lines")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.setup_text()))
        for b in (self.start_button, self.stop_button, self.open_button, self.copy_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.status = QLabel("Not running.")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status)
        layout.addWidget(QLabel("Set in the agent's shell (or its configuration file):"))
        self.setup = QPlainTextEdit()
        self.setup.setReadOnly(True)
        self.setup.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.setup.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setup.setPlaceholderText("The lines appear when the proxy runs.")
        self.setup.setMaximumHeight(150)
        layout.addWidget(self.setup)
        layout.addWidget(QLabel("Exchanges"))
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for col in (0, 2, 3, 4, 5):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        layout.addWidget(self.table, 1)

    # --- intents
    def _on_start(self) -> None:
        self.start_button.setEnabled(False)
        self.status.setText("Starting…")
        self.start_requested.emit(self.port.value(), self.upstream.text().strip())

    def done(self, result: int) -> None:  # closed by its title bar (Qt rejects it) or Esc
        super().done(result)
        self.closed.emit()

    # --- told
    def set_running(self, url: str, capture: str, setup: Sequence[str], upstreams: Mapping[str, str]) -> None:
        self.capture = capture
        self.table.setRowCount(0)
        self.port.setEnabled(False)
        self.upstream.setEnabled(False)
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.open_button.setEnabled(True)
        self.copy_button.setEnabled(True)
        to = ", ".join(f"{k}: {v}" for k, v in upstreams.items())
        self.status.setText(f"Recording on {url} → {to}\nCapture: {capture}\n"
                            "It opens in the window, followed live, with the first call the agent makes.")
        self.setup.setPlainText("\n".join(setup))

    def add_exchange(self, row: Mapping[str, Any]) -> None:
        n = self.table.rowCount()
        self.table.insertRow(n)
        status = row.get("status")
        outcome = str(row.get("outcome") or "")
        shown_status = str(status) if status is not None else ""
        if outcome and outcome != "complete":
            shown_status = f"{shown_status} {outcome}".strip()
        ms = row.get("ms")
        cells = (str(row.get("seq") or ""), f"{row.get('method') or ''} {row.get('path') or ''}".strip(),
                 shown_status, _count(row.get("prompt")), _count(row.get("completion")),
                 f"{ms:,.0f}" if isinstance(ms, int | float) else "")
        for col, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if col != 1:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(n, col, item)
        self.table.scrollToBottom()

    def set_stopped(self, text: str) -> None:
        self.port.setEnabled(True)
        self.upstream.setEnabled(True)
        self.start_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.copy_button.setEnabled(False)
        self.open_button.setEnabled(bool(self.capture))
        self.status.setText(text)

    def set_error(self, text: str) -> None:
        self.set_stopped(text)
        self.open_button.setEnabled(False)

    # --- what is shown (tests)
    def setup_text(self) -> str:
        return self.setup.toPlainText()

    def status_text(self) -> str:
        return self.status.text()

    def exchange_rows(self) -> list[list[str]]:
        return [[(self.table.item(r, c) or QTableWidgetItem()).text() for c in range(self.table.columnCount())]
                for r in range(self.table.rowCount())]


__all__ = ["RecordDialog"]
