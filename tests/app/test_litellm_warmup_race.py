"""The window, pressed early: Compact and Send while litellm is still loading in the background.

Issue 10.4: with an imported session (its model is not the bundled one) the app was started and
*Compact* pressed in the first seconds, while the warm-up thread was still importing litellm; the
preview failed with "cannot import name 'import_string' from partially initialized module
'pydantic._internal._validators'", and every later call of the offline model failed the same way.

Here the race happens every time: a fresh app process (this test process has litellm imported
already) whose warm-up import is held inside pydantic for two seconds; Compact and Send are pressed
while it is there. Both must work, the background import must be the only import running (other
threads wait at the gate), and the offline model must answer afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

SCRIPT = textwrap.dedent(
    """
    import asyncio, importlib.abc, json, os, sys, threading, time
    os.environ["QT_API"] = "pyside6"
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

    reached = threading.Event()  # the warm-up got inside litellm's import
    holding = threading.Event()  # … and is still held there
    overlapping = []  # third-party modules other threads imported meanwhile
    OURS = {"engine", "app", "widgets", "tests"}

    class SlowDown(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            main = threading.current_thread() is threading.main_thread()
            top = name.split(".")[0]
            if name == "pydantic._internal._validators" and not main and not reached.is_set():
                holding.set()
                reached.set()
                time.sleep(15.0)  # long enough that a loaded machine still opens the session within it
                holding.clear()
            elif holding.is_set() and top.lstrip("_") not in sys.stdlib_module_names and top not in OURS:
                overlapping.append(name)
            return None

    sys.meta_path.insert(0, SlowDown())

    from engine.model import messages as m
    from engine.context.conversation import SessionStore

    store = SessionStore()
    session = store.create("imported run", model="openai/gpt-4o-mini")
    for i in range(8):
        session.extend([m.user(f"Question {i}: what does step {i} of the build do? " + "details " * 60),
                        m.assistant(f"Step {i} compiles module {i} and runs its tests. " + "output " * 60)])
    session.close()

    import qasync
    from PySide6.QtWidgets import QApplication

    app = QApplication(["race"])
    app.setQuitOnLastWindowClosed(False)  # as app.main: the main coroutine ends the loop
    result = {"notices": [], "preview": None, "turn": None}

    async def main():
        from app.controller import Controller
        from app.main_window import MainWindow
        from engine.llm import client as llm

        controller = Controller()
        window = MainWindow(controller)
        window.show()
        loop = asyncio.get_running_loop()
        controller.notice.connect(lambda level, text: result["notices"].append([level, text]))
        preview = loop.create_future()
        controller.preview_ready.connect(lambda p: preview.done() or preview.set_result(["ready", p.summary.text]))
        controller.preview_failed.connect(lambda r: preview.done() or preview.set_result(["failed", r]))
        finished = loop.create_future()
        controller.turn_finished.connect(lambda e: finished.done() or finished.set_result(e))
        app.processEvents()
        window.ensure_chart()  # as app.main does: the chart's import before the warm-up's
        loaded = loop.create_future()
        controller.session_loaded.connect(lambda v: loaded.done() or loaded.set_result(v))
        controller.start()
        await asyncio.wait_for(loaded, 60)  # the session opens while litellm is loading
        for _ in range(6000):
            if reached.is_set():
                break
            await asyncio.sleep(0.01)
        result["warmup_held"] = holding.is_set()
        result["compact_pressed"] = controller.start_preview()
        result["preview"] = await asyncio.wait_for(preview, 300)
        controller.discard_preview()
        result["send_pressed"] = controller.send("Say hello.")
        done = await asyncio.wait_for(finished, 300)
        result["turn"] = {"ok": done.ok, "final_text": done.final_text}
        result["imports"] = llm._imports
        result["overlapping"] = sorted(set(overlapping))
        window.close()
        await controller.shutdown()

    with asyncio.Runner(loop_factory=qasync.QEventLoop) as runner:
        runner.run(main())
    print(json.dumps(result, default=str))
    """
)


def test_compact_and_send_while_litellm_loads(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "CTXBENCH_DATA_DIR": str(tmp_path / "data"),
           "CTXBENCH_CONFIG_DIR": str(tmp_path / "config")}
    for _attempt in range(3):  # on a loaded machine the warm-up can pass the held import before the session opens
        proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if out["warmup_held"]:
            break  # the race happened: Compact and Send were pressed while litellm's import was held
        shutil.rmtree(tmp_path / "data", ignore_errors=True)
        shutil.rmtree(tmp_path / "config", ignore_errors=True)
    assert out["warmup_held"] and out["compact_pressed"] and out["send_pressed"], out
    kind, summary = out["preview"]
    assert kind == "ready" and summary.strip(), out  # the preview was made, no import error
    assert "partially initialized" not in json.dumps(out)
    assert out["turn"]["ok"] and out["turn"]["final_text"].strip(), out
    assert not [n for n in out["notices"] if n[0] == "error"], out["notices"]
    assert out["imports"] == {"attempts": 1, "failures": 0}, out
    assert out["overlapping"] == [], out["overlapping"]  # nothing else imported beside the warm-up
