"""GUI test fixtures: Qt warnings and criticals fail the test that caused them.

pytest-qt's own ``qt_log_level_fail`` only works while pytest captures output and only looks at the
test body; this fixture installs a Qt message handler around every test in ``tests/widgets`` (set-up,
body and tear-down), keeps chaining to the previous handler (pytest-qt's, so its report still shows
the messages) and fails the test when a QtWarningMsg, QtCriticalMsg or QtFatalMsg arrived.
``tests/widgets/test_conftest.py`` proves in a separate pytest process that it really fails.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

from PySide6.QtCore import QMessageLogContext, QtMsgType, qInstallMessageHandler

FAILING = (QtMsgType.QtWarningMsg, QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg)

# Messages that are not our bugs. Each entry says why it is harmless; keep this list short.
IGNORED: tuple[re.Pattern[str], ...] = (
    # The offscreen platform plugin reports window operations it cannot do (propagateSizeHints(),
    # raise() of a tooltip window, grabbing the keyboard for a popup): a limitation of the test
    # platform, not of our code.
    re.compile(r"^This plugin does not support (\w+\(\)|grabbing the (keyboard|mouse))$"),
)


class QtMessageRecorder:
    """Records Qt messages; ``problems()`` lists the warnings and criticals not in IGNORED."""

    def __init__(self) -> None:
        self.records: list[tuple[QtMsgType, str]] = []
        self._previous: Callable[..., Any] | None = None

    def handler(self, msg_type: QtMsgType, context: QMessageLogContext, message: str) -> None:
        self.records.append((msg_type, message))
        if self._previous is not None:
            try:
                self._previous(msg_type, context, message)
            except Exception:  # never raise into Qt
                pass

    def install(self) -> None:
        self._previous = qInstallMessageHandler(self.handler)

    def uninstall(self) -> None:
        qInstallMessageHandler(self._previous)
        self._previous = None

    def problems(self) -> list[str]:
        out = []
        for msg_type, message in self.records:
            if msg_type in FAILING and not any(p.search(message) for p in IGNORED):
                out.append(f"{msg_type.name}: {message}")
        return out

    def clear(self) -> None:
        self.records.clear()


@pytest.fixture(scope="session", autouse=True)
def main_thread_gc(qapp: Any) -> Iterator[Any]:
    """Cycles collected on the main thread's event loop only, as in the app (app/collector.py): a collection in
    a worker thread, or in the middle of a Qt call, was seen to hang the window."""
    from app.collector import MainThreadCollector
    from app.qt_hooks import defuse_feature_hook

    defuse_feature_hook()  # as app.main does: PySide6's per-import check never runs a module's __getattr__
    collector = MainThreadCollector(qapp)
    yield collector
    collector.stop()


@pytest.fixture(autouse=True)
def qt_messages(qapp: Any) -> Iterator[QtMessageRecorder]:
    """Fail the test when Qt emitted a warning or worse during it."""
    recorder = QtMessageRecorder()
    recorder.install()
    try:
        yield recorder
        qapp.processEvents()
    finally:
        recorder.uninstall()
    problems = recorder.problems()
    if problems:
        pytest.fail("Qt emitted warnings during the test:\n" + "\n".join(problems), pytrace=False)
