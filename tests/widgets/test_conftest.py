"""Proof that a Qt warning really fails a GUI test (the fixture in tests/widgets/conftest.py).

A separate pytest process runs probe tests next to a copy of our conftest: the probes that make Qt
emit a warning or a critical message must fail, the clean and the ignored ones must pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import qWarning

HERE = Path(__file__).resolve().parent

PROBES = '''
from PySide6.QtCore import qCritical, qDebug, qWarning


def test_warning():
    qWarning("probe: something is wrong")


def test_critical():
    qCritical("probe: something is badly wrong")


def test_clean():
    qDebug("probe: debug output is fine")


def test_ignored_platform_message():
    qWarning("This plugin does not support propagateSizeHints()")
'''


def _run_probes(tmp_path: Path, *extra: str) -> tuple[int, str]:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(PROBES, encoding="utf-8")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QT_API="pyside6")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:asyncio", "-p", "no:cacheprovider", "-rA", "-q", *extra,
         str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _outcomes(output: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for outcome, name in re.findall(r"^(PASSED|FAILED|ERROR) \S*::(\w+)", output, re.MULTILINE):
        found.setdefault(name, set()).add(outcome)
    return found


def test_qt_warning_fails_the_test(tmp_path: Path) -> None:
    code, output = _run_probes(tmp_path)
    assert code != 0, output
    outcomes = _outcomes(output)
    assert outcomes["test_warning"] & {"FAILED", "ERROR"}, output
    assert outcomes["test_critical"] & {"FAILED", "ERROR"}, output
    assert outcomes["test_clean"] == {"PASSED"}, output
    assert outcomes["test_ignored_platform_message"] == {"PASSED"}, output
    assert "probe: something is wrong" in output
    assert "Qt emitted warnings during the test" in output


def test_fails_even_without_output_capture(tmp_path: Path) -> None:
    # pytest-qt's own log check is off with -s; ours must still fail the test
    code, output = _run_probes(tmp_path, "-s")
    assert code != 0, output
    assert _outcomes(output)["test_warning"] & {"FAILED", "ERROR"}, output


def test_recorder_sees_warnings_in_this_process(qt_messages) -> None:
    qWarning("deliberate warning, cleared below")
    assert any("deliberate warning" in p for p in qt_messages.problems())
    qt_messages.clear()
    assert qt_messages.problems() == []
