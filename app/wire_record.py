"""File → Record an agent… (issue 31): the recording proxy started from the window.

The dialog (widgets.record_dialog) asks for a port and an upstream; :class:`engine.workbench.recording.ProxyService`
runs the proxy on a thread of its own with its own event loop (forwarding never waits on the UI, nor the UI on
it). Starting and stopping (each waits on the proxy's thread for at most a few seconds) run in a worker thread too;
what they answer, and each exchange the proxy tells from its thread, reach the UI thread through queued signals.
The capture opens in the window read-only and followed live with its first provider call (a capture with none is
no session yet; Sources lists it too); "Open in the window" opens it again. Closing the dialog, or the window,
stops the proxy.

:func:`wire_record` is called once from ``MainWindow._connect``; its state is a :class:`RecordWiring` stored as
``window.record_wiring``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from engine.capture.proxy import ProxyError
from engine.workbench.recording import ProxyService, ProxyStarted, ProxyStopped
from widgets.record_dialog import RecordDialog

if TYPE_CHECKING:
    from app.window_base import WindowBase


def _menu(window: WindowBase, name: str) -> QMenu | None:
    for action in window.menuBar().actions():
        menu: Any = action.menu()
        if isinstance(menu, QMenu) and action.text().replace("&", "") == name:
            return menu
    return None


class RecordWiring(QObject):
    """The menu action, the dialog and the proxy service (see the module docstring)."""

    exchange = Signal(dict)  # from the proxy's thread: queued to the UI thread
    started = Signal(object)  # ProxyStarted, or the error's text
    stopped = Signal(object)  # ProxyStopped or None

    def __init__(self, window: WindowBase) -> None:
        super().__init__(window)
        self.window = window
        self.dialog: RecordDialog | None = None
        self.service = ProxyService(on_exchange=self.exchange.emit)
        self.busy: threading.Thread | None = None
        self.opened = False  # the capture of this run was opened in the window
        self.action = QAction("Record an agent…", window)
        self.action.setToolTip("Run the recording proxy: every request an agent sends, recorded and shown live")
        self.action.triggered.connect(self.show_dialog)
        file_menu = _menu(window, "File")
        if file_menu is not None:  # after Open / Export, before Settings…
            file_menu.insertAction(window.settings_action, self.action)
            file_menu.insertSeparator(window.settings_action)
        self.exchange.connect(self._on_exchange)
        self.started.connect(self._on_started)
        self.stopped.connect(self._on_stopped)
        window.closed.connect(self.shutdown)

    def show_dialog(self) -> RecordDialog:
        if self.dialog is None:
            self.dialog = RecordDialog(self.window)
            self.dialog.start_requested.connect(self.start)
            self.dialog.stop_requested.connect(self.stop)
            self.dialog.open_requested.connect(self._open)
            self.dialog.closed.connect(self.stop)
        self.dialog.open()
        self.dialog.raise_()
        return self.dialog

    # --- intents
    def start(self, port: int, upstream: str) -> None:
        if self.service.running or self.busy is not None:
            return

        def work() -> None:
            try:
                result: object = self.service.start(port, upstream or None, agent="")
            except ProxyError as exc:
                result = str(exc)
            self.started.emit(result)

        self.busy = threading.Thread(target=work, name="ctxbench-proxy-start", daemon=True)
        self.busy.start()

    def stop(self) -> None:
        if not self.service.running:
            return

        def work() -> None:
            self.stopped.emit(self.service.stop())

        threading.Thread(target=work, name="ctxbench-proxy-stop", daemon=True).start()

    def shutdown(self) -> None:
        """The window closes: the proxy stops now (the capture closed)."""
        if self.busy is not None:
            self.busy.join(12)
        self.service.stop()

    def _open(self, path: str) -> None:
        if path:
            self.window.controller.open_source(path)

    # --- told
    def _on_started(self, result: Any) -> None:
        self.busy = None
        if self.dialog is None:
            return
        if isinstance(result, ProxyStarted):
            self.dialog.set_running(result.url, str(result.capture), result.setup, result.upstreams)
            if not self.dialog.isVisible():  # closed while it started: stopped at once
                self.stop()
                return
            self.opened = False
            self.window.controller.scan_sources(False)
        else:
            self.dialog.set_error(f"Not started: {result}")

    def _on_exchange(self, row: dict[str, Any]) -> None:
        if self.dialog is None:
            return
        self.dialog.add_exchange(row)
        if row.get("call") and not self.opened and self.service.running:
            self.opened = True
            self._open(self.dialog.capture)

    def _on_stopped(self, result: ProxyStopped | None) -> None:
        if self.dialog is None or result is None:
            return
        text = f"Stopped: {result.exchanges} exchange(s) recorded in {result.capture}"
        if len(result.parts) > 1:
            text += f" ({len(result.parts)} parts)"
        if result.problems:
            text += "\n" + "\n".join(result.problems[:3])
        self.dialog.set_stopped(text)


def wire_record(window: WindowBase) -> RecordWiring:
    """Add File → Record an agent… to ``window`` (see the module docstring)."""
    wiring = RecordWiring(window)
    window.record_wiring = wiring  # type: ignore[attr-defined]
    return wiring


__all__ = ["RecordWiring", "wire_record"]
