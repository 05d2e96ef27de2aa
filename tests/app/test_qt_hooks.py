"""PySide6's per-import check defused (app/qt_hooks.py): it no longer runs a module's ``__getattr__``.

Each case runs in a fresh interpreter (the hook is process-wide): PySide6 loaded, then a module with a
module-level ``__getattr__`` that records what it was asked (as pydantic's import on demand) imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

SCRIPT = textwrap.dedent(
    """
    import json, sys, threading
    sys.path.insert(0, sys.argv[1])
    import PySide6.QtWidgets
    if sys.argv[2] == "defused":
        from app.qt_hooks import defuse_feature_hook
        assert defuse_feature_hook()
    import asks
    import qt_user
    answers = {}
    def other_thread():
        import asks_too  # the warm-up's imports run on a worker thread
        answers["asks_too"] = list(asks_too.ASKED)
    t = threading.Thread(target=other_thread)
    t.start(); t.join()
    feature = sys.modules["shibokensupport.feature"]
    print(json.dumps({"asks": list(asks.ASKED), **answers,
                      "marks": {n: feature.pyside_feature_dict.get(n) for n in ("asks", "qt_user", "asks_too")}}))
    """
)

ASKS = "ASKED = []\n\n\ndef __getattr__(name):\n    ASKED.append(name)\n    raise AttributeError(name)\n"


def _run(tmp_path: Path, mode: str) -> dict[str, object]:
    (tmp_path / "asks.py").write_text(ASKS)
    (tmp_path / "asks_too.py").write_text(ASKS)
    (tmp_path / "qt_user.py").write_text("from PySide6.QtCore import QObject\n")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), mode], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_the_defused_hook_never_asks_a_module_for_an_attribute(tmp_path: Path) -> None:
    out = _run(tmp_path, "defused")
    assert out["asks"] == [] and out["asks_too"] == [], out
    # the same answers as shiboken's own check: a module naming PySide6 is marked 0, any other -1 (ignored)
    assert out["marks"] == {"asks": -1, "qt_user": 0, "asks_too": -1}, out


def test_without_it_the_hook_runs_the_module_getattr(tmp_path: Path) -> None:
    """The control: PySide6 as shipped asks every new module for ``__wrapped__`` (the test can fail)."""
    out = _run(tmp_path, "shipped")
    assert "__wrapped__" in out["asks"] and "__wrapped__" in out["asks_too"], out  # type: ignore[operator]
    assert out["marks"] == {"asks": -1, "qt_user": 0, "asks_too": -1}, out
