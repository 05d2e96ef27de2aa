"""engine.store.logs: the rotating log file in the data directory, at the settings' level; the CLI and the
service log at their boundaries, with the traceback of what failed, never a key."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.store import logs
from engine.store.config import Settings, data_dir, settings_path
from tests.conftest import REPO


@pytest.fixture(autouse=True)
def _closed() -> object:
    yield None
    logs.close()


def test_records_of_the_project_go_to_the_file_at_the_level_set(tmp_path: Path) -> None:
    path = logs.configure("warning", tmp_path / "logs")
    assert path == tmp_path / "logs" / logs.FILE_NAME
    logging.getLogger("engine.sources.readers").info("not kept at warning")
    logging.getLogger("engine.workbench.sources").warning("following x: poll failed")
    logging.getLogger("some.library").warning("not one of ours")
    text = path.read_text()
    assert "WARNING MainThread engine.workbench.sources: following x: poll failed" in text
    assert "not kept" not in text and "not one of ours" not in text
    assert logs.configure("debug", tmp_path / "logs") == path  # configured again: one handler, not two
    logging.getLogger("app.cli").debug("once")
    assert path.read_text().count("once") == 1


def test_the_file_rotates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_BYTES", 2_000)
    path = logs.configure("info", tmp_path)
    assert path is not None
    for i in range(200):
        logging.getLogger("engine").info("line %d %s", i, "x" * 40)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == [logs.FILE_NAME, *(f"{logs.FILE_NAME}.{n}" for n in range(1, logs.BACKUPS + 1))]
    assert all(p.stat().st_size <= 2_200 for p in tmp_path.iterdir())


def test_a_bad_level_is_named_and_an_unwritable_folder_leaves_no_handler(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="log level must be one of debug, info, warning, error, got 'loud'"):
        logs.configure("loud", tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert logs.configure("info", blocker / "logs") is None  # a file where the folder would be
    assert not any(isinstance(h, logging.handlers.RotatingFileHandler)
                   for h in logging.getLogger("engine").handlers)


def test_the_level_comes_from_the_settings_file() -> None:
    settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings_path().write_text('log_level = "debug"\n')
    path = logs.configure_from_settings()
    assert path == data_dir() / "logs" / logs.FILE_NAME
    assert logging.getLogger("engine").level == logging.DEBUG
    settings_path().write_text('log_level = "shouting"\n')  # a bad value: the settings say so; the log is at info
    logs.configure_from_settings()
    assert logging.getLogger("engine").level == logging.INFO
    with pytest.raises(ValueError, match="log_level must be one of"):
        Settings(log_level="shouting").validate()


def test_a_failing_command_leaves_its_traceback_in_the_log_not_on_the_terminal(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from app import cli

    def broken(*_args: object, **_kw: object) -> int:
        raise RuntimeError("the index exploded")

    monkeypatch.setattr(cli, "_dispatch", broken)
    monkeypatch.delenv("CTXBENCH_DEBUG", raising=False)
    assert cli.main(["sources"]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: the index exploded" in err and "Traceback" not in err
    text = (data_dir() / "logs" / logs.FILE_NAME).read_text()
    assert "INFO    MainThread app.cli: ctxbench sources" in text
    assert "ERROR   MainThread app.cli: ctxbench sources failed" in text and "Traceback" in text
    assert os.environ.get("OPENAI_API_KEY", "sk-none") not in text


def test_a_traceback_quoting_a_key_is_written_without_it(tmp_path: Path) -> None:
    from engine.store.secrets import forget_secrets, remember_secret

    path = logs.configure("info", tmp_path)
    assert path is not None
    key = "sk-live-0123456789abcdefghij"
    remember_secret(key)
    try:
        try:
            raise RuntimeError(f"401 from the provider: bad key {key}")
        except RuntimeError:
            logging.getLogger("engine.llm.client").warning("provider call failed", exc_info=True)
    finally:
        forget_secrets()
    text = path.read_text()
    assert "Traceback" in text and "RuntimeError: 401 from the provider: bad key [redacted]" in text
    assert key not in text


UNCAUGHT = """
import asyncio, sys, threading
from pathlib import Path
from engine.store import logs
logs.configure("info", Path(sys.argv[1]))
logs.log_uncaught()
logs.log_uncaught()  # twice: still one record each

def worker():
    raise ValueError("broken in a thread")

t = threading.Thread(target=worker, name="scan-worker")
t.start(); t.join()

async def main():
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(logs.loop_exception_handler(loop.default_exception_handler))
    loop.call_soon(lambda: 1 / 0)  # a callback that raises: the loop goes on
    await asyncio.sleep(0.05)

asyncio.run(main())
raise KeyError("broken on the main thread (a Qt slot's exception ends here too)")
"""


def test_exceptions_nothing_caught_leave_their_traceback_in_the_file(tmp_path: Path) -> None:
    """A thread's, an event-loop callback's and the main thread's uncaught exceptions are logged with their
    tracebacks, and still printed as Python prints them (stderr)."""
    proc = subprocess.run([sys.executable, "-c", UNCAUGHT, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "KeyError" in proc.stderr and "ValueError" in proc.stderr
    text = (tmp_path / logs.FILE_NAME).read_text()
    assert text.count("uncaught ValueError in thread scan-worker") == 1
    assert "ValueError: broken in a thread" in text
    assert "Exception in callback" in text and "ZeroDivisionError" in text
    assert text.count("uncaught KeyError") == 1 and "broken on the main thread" in text
    assert text.count("Traceback (most recent call last)") == 3
