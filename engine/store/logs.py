"""The log file a user can send: ``<data dir>/logs/ctxbench.log``, rotated (5 files of 2 MB at most).

:func:`configure` (the app and the CLI call it once at start) sends the records of the project's loggers —
``engine.*``, ``app.*``, ``widgets.*``, each module's ``logging.getLogger(__name__)`` — at the level the
settings name (``log_level``) to that file, with the time, the thread and the module. The boundaries log:
files read, provider calls, follow polls, usage-index updates, the window's bridge to the service; every broad
``except`` at an outer edge logs its traceback, and so does every exception nothing caught (:func:`log_uncaught`:
a Qt slot's, a thread's, an event loop callback's). A data directory that cannot be written leaves logging to the
standard handlers (nothing is lost but the file). Nothing here writes a prompt, a file's content or a key: each
record, its traceback included (a provider's error message may quote a request), is scrubbed of API keys and
auth headers (:func:`engine.store.secrets.scrub`) as it is written.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from engine.store.config import LOG_LEVELS, data_dir, load_settings
from engine.store.secrets import scrub

LOGGERS = ("engine", "app", "widgets")
FILE_NAME = "ctxbench.log"
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 4
FORMAT = "%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s"


class ScrubbingFormatter(logging.Formatter):
    """:data:`FORMAT`, the whole text (message and traceback) with API keys and auth headers replaced."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


_lock = threading.Lock()
_handler: logging.Handler | None = None


def log_dir() -> Path:
    """Where the log files are (the data directory's ``logs`` folder)."""
    return data_dir() / "logs"


def log_file() -> Path:
    return log_dir() / FILE_NAME


def configure(level: str = "info", folder: Path | None = None) -> Path | None:
    """Log the project's loggers at ``level`` to the rotating file in ``folder`` (default :func:`log_dir`);
    again with another level or folder replaces the handler. The file's path, or None when it cannot be written."""
    global _handler
    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    folder = log_dir() if folder is None else Path(folder)
    with _lock:
        _drop_handler()
        path = folder / FILE_NAME
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handler = logging.handlers.RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS,
                                                           encoding="utf-8", delay=False)
        except OSError:
            return None
        handler.setFormatter(ScrubbingFormatter(FORMAT))
        handler.setLevel(getattr(logging, level.upper()))
        for name in LOGGERS:
            logger = logging.getLogger(name)
            logger.setLevel(getattr(logging, level.upper()))
            logger.addHandler(handler)
        _handler = handler
    return path


def configure_from_settings() -> Path | None:
    """:func:`configure` at the level of the settings file (``info`` when it names none or cannot be read)."""
    try:
        level = load_settings().settings.log_level
    except (OSError, ValueError):
        level = "info"
    return configure(level if level in LOG_LEVELS else "info")


_uncaught = logging.getLogger("app.uncaught")
_hooked = False


def log_uncaught() -> None:
    """Send every exception nothing caught to the log file with its traceback, then on to the handler that was
    there (Python's prints it): the main thread's (``sys.excepthook``: an exception in a Qt slot ends there too,
    PySide6 prints it through it), other threads' (``threading.excepthook``) and an event loop's (the handler
    :func:`loop_exception_handler` gives). Once per process."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    before_sys, before_thread = sys.excepthook, threading.excepthook

    def on_main(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        _uncaught.error("uncaught %s", kind.__name__, exc_info=(kind, exc, tb))
        before_sys(kind, exc, tb)

    def on_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit and args.exc_value is not None:
            _uncaught.error("uncaught %s in thread %s", args.exc_type.__name__,
                            args.thread.name if args.thread else "?",
                            exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
        before_thread(args)

    sys.excepthook = on_main
    threading.excepthook = on_thread


def loop_exception_handler(default: Callable[[dict[str, Any]], None]) -> Callable[[Any, dict[str, Any]], None]:
    """An event loop's exception handler (``loop.set_exception_handler``) that logs what a callback or a task nobody
    awaited raised, with its traceback, then hands it to ``default`` (the loop's own, which prints it)."""

    def handle(_loop: Any, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message") or "unhandled exception in the event loop")
        if isinstance(exc, BaseException):
            _uncaught.error("%s", message, exc_info=(type(exc), exc, exc.__traceback__))
        else:
            _uncaught.error("%s", message)
        default(context)

    return handle


def close() -> None:
    """Stop writing the file (tests; the process's end closes it anyway)."""
    with _lock:
        _drop_handler()


def _drop_handler() -> None:
    """Take the file handler off the project's loggers and close it (the caller holds the lock)."""
    global _handler
    if _handler is not None:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(_handler)
        _handler.close()
        _handler = None


__all__ = ["BACKUPS", "FILE_NAME", "LOGGERS", "MAX_BYTES", "ScrubbingFormatter", "close", "configure",
           "configure_from_settings", "log_dir", "log_file"]
