"""The desktop app's entry point: a QApplication, one qasync event loop, the main window.

``ctxbench`` (no command) calls :func:`run_gui`. Options (the rest goes to Qt)::

    ctxbench [gui] [--session ID] [--open TRANSCRIPT]

The window is shown first; the engine opens the session right after, the other agents' sessions are
scanned (the Sources tab, the first-run pointer to it) and litellm (~3 s to import) loads in a
background thread, so the window appears in well under 1.5 s. Imports from other threads meanwhile
wait for litellm's (:mod:`engine.llm.lazyimport`). One
``asyncio.Runner(loop_factory=qasync.QEventLoop)`` runs the whole app (Python 3.11 has no
``asyncio.run(loop_factory=…)``); closing the window ends the main coroutine, which cancels the
running work and closes the session.

``CTXBENCH_STARTUP_PROBE=1`` prints ``window shown after N.NNN s (litellm imported: False)`` on
stderr once the window is painted and quits (the start-up time test uses it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

_T0 = time.perf_counter()


def seconds_since_start() -> float:
    """Seconds since this process started (from /proc where there is one, else since this import)."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _T0


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="ctxbench", description="Context Workbench (desktop app)")
    parser.add_argument("--session", metavar="ID", help="open this session (its id in the sessions folder)")
    parser.add_argument("--open", metavar="TRANSCRIPT", help="import and open a transcript (.jsonl, .traj.json)")
    return parser.parse_known_args(list(argv))


def run_gui(argv: Sequence[str] | None = None) -> int:
    """Start the desktop app; returns the exit code when the window is closed."""
    from engine.llm import lazyimport

    lazyimport.install()  # before Qt: PySide6's own __import__ hooks then call it (engine/llm/lazyimport.py)
    os.environ["QT_API"] = "pyside6"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args, qt_args = _parse(sys.argv[1:] if argv is None else argv)
    from engine.store import logs

    logs.configure_from_settings()  # <data dir>/logs/ctxbench.log (Help → Open log folder)
    logs.log_uncaught()  # a Qt slot's, a thread's exception: its traceback in the file too
    logging.getLogger(__name__).info("ctxbench window starting (pid %d)", os.getpid())
    from app.qt_platform import ensure_platform

    if code := ensure_platform(qt_args):  # a clear message and exit 2, not Qt's abort
        return code

    import qasync
    from PySide6.QtWidgets import QApplication

    from app.qt_hooks import defuse_feature_hook

    defuse_feature_hook()  # before litellm's background import meets PySide6's per-import check (app/qt_hooks.py)
    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0] if sys.argv else "ctxbench", *qt_args])
    assert isinstance(app, QApplication)
    app.setApplicationName("ctxbench")
    app.setApplicationDisplayName("Context Workbench")
    app.setQuitOnLastWindowClosed(False)  # the main coroutine ends the loop when the window closes
    from app.collector import MainThreadCollector

    MainThreadCollector(app)  # cycles collected on the main thread's event loop only (app/collector.py)
    with asyncio.Runner(loop_factory=qasync.QEventLoop) as runner:
        return int(runner.run(_main(app, args)))


async def _main(app: Any, args: argparse.Namespace) -> int:
    from PySide6.QtCore import QTimer

    from app.controller import Controller
    from app.main_window import MainWindow
    from engine.store import logs

    loop = asyncio.get_running_loop()
    loop.set_exception_handler(logs.loop_exception_handler(loop.default_exception_handler))
    controller = Controller()
    window = MainWindow(controller)
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_closed() -> None:
        if not done.done():
            done.set_result(0)

    window.closed.connect(on_closed)
    window.show()
    probe = bool(os.environ.get("CTXBENCH_STARTUP_PROBE"))
    if probe:
        app.processEvents()
        print(f"window shown after {seconds_since_start():.3f} s "
              f"(litellm imported: {'litellm' in sys.modules})", file=sys.stderr, flush=True)
        QTimer.singleShot(0, window.close)
    else:
        _stop_on_signals(window)
        app.processEvents()  # the window is painted before the chart's import
        window.ensure_chart()  # pyqtgraph, imported before litellm's background import starts
        controller.start()
        controller.scan_sources()  # the other agents' sessions: the Sources tab and the first-run pointer
        if args.session:
            controller.open_session(args.session)
        if args.open:
            controller.import_transcript(args.open)
    try:
        return await done
    finally:
        await controller.shutdown()


def _stop_on_signals(window: Any) -> None:
    """Ctrl-C / SIGTERM close the window like its close button (the history is settled)."""
    from PySide6.QtCore import QTimer

    def handler(_signum: int, _frame: Any) -> None:
        QTimer.singleShot(0, window.close)

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            return
    ticker = QTimer(window)  # lets Python run its signal handlers while Qt waits for events
    ticker.setInterval(250)
    ticker.timeout.connect(lambda: None)
    ticker.start()


if __name__ == "__main__":
    sys.exit(run_gui())
