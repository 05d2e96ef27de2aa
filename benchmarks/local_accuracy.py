"""The bundled model's pre-call figure against the prompt tokens llama.cpp reports (issue 10.3).

A scripted multi-turn run on the real offline model (SmolLM2-135M through llama-cpp-python, the
app's own path: :class:`engine.agent.Agent` → litellm → the local provider), the default system
prompt and tools. Between turns the history gets real tool exchanges (an assistant tool call and
the result of the real ``read_file`` / ``list_dir`` tools on a small workspace), so calls carry tool
results. Every call's snapshot in ``events.jsonl`` holds the estimate the agent made *before* the
call (calibrated on the calls before it) beside ``provider_prompt_tokens`` (llama.cpp's count).

The same run is made with ``estimator = "heuristic"`` (the default before) and ``"auto"`` (the
bundled model's own tokenizer). Target: every call within 2 %, the first one included.

    python -m benchmarks local_accuracy
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import Figure
from engine.agent import Agent
from engine.context.conversation import Session
from engine.context.tokens import make_estimator
from engine.llm.client import LOCAL_MODEL, LLMConfig
from engine.model import messages as m
from engine.store.config import Settings
from engine.tools.registry import ToolBox

TURNS = [
    "What does notes.txt say about the release? 12 34 56 78 90 and a b c d e f.",
    "List the numbers 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 in words, briefly.",
    "Summarise what you know about the project in two short sentences.",
    "Which file holds the version, and what is 2026 - 1999?",
    "Thanks. One more: what is the capital of France?",
]
TOOL_STEPS = [("read_file", {"path": "notes.txt"}), ("list_dir", {"path": "."}), ("read_file", {"path": "version.py"})]


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text(
        "Release 2.4 ships on Friday.\n" + "".join(f"- item {i}: check {i * 7 % 13} of 13\n" for i in range(40)),
        encoding="utf-8",
    )
    (ws / "version.py").write_text('__version__ = "2.4.0"\nBUILD = 20261123\n', encoding="utf-8")
    return ws


async def _tool_exchange(agent: Agent, toolbox: ToolBox, step: int) -> None:
    """An assistant tool call and the real tool's result, appended as the agent would."""
    name, args = TOOL_STEPS[step % len(TOOL_STEPS)]
    cid = f"call_{step}"
    call = {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    result = await toolbox.run(name, json.dumps(args))
    agent.session.extend([m.assistant(None, tool_calls=[call]), m.tool_result(cid, result.text, name=name)])


async def _run(estimator: str, root: Path) -> list[tuple[int, int]]:
    settings = Settings().replace(model=LOCAL_MODEL, estimator=estimator, max_tokens=48, auto_compact=False)
    ws = _workspace(root)
    session = Session.create(root / f"session-{estimator}", "bench",
                             estimator=make_estimator(estimator, LOCAL_MODEL))
    toolbox = ToolBox(ws, session.path)
    config = LLMConfig(model=LOCAL_MODEL, max_tokens=48, temperature=0.0)
    agent = Agent(session, settings, llm_config=config, toolbox=toolbox, emit=lambda _e: None)
    for i, text in enumerate(TURNS):
        if i:
            await _tool_exchange(agent, toolbox, i)
        await agent.run_turn(text)
    pairs = []
    for record in session.read_events():
        if record.get("type") == "context" and record.get("provider_prompt_tokens"):
            regions = record["regions"]
            estimate = sum(int(regions[k]) for k in ("system", "summary", "history", "tools"))
            pairs.append((estimate, int(record["provider_prompt_tokens"])))
    session.close()
    return pairs


def _errors(pairs: list[tuple[int, int]]) -> list[float]:
    return [abs(est - actual) / actual * 100 for est, actual in pairs]


def run() -> list[Figure]:
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        for estimator in ("heuristic", "auto"):
            root = Path(tmp) / estimator
            root.mkdir()
            pairs = asyncio.run(_run(estimator, root))
            errs = _errors(pairs)
            first = errs[0] if errs else float("nan")
            target = estimator == "auto"
            figures += [
                Figure(f"bundled model, {estimator}: calls measured", len(pairs), "calls", "", None),
                Figure("  first call |estimate - llama.cpp| / llama.cpp", first, "%",
                       "< 2 %" if target else "(before)", (first < 2) if target else None),
                Figure("  median over the run", statistics.median(errs) if errs else float("nan"), "%",
                       "< 2 %" if target else "(before)", (statistics.median(errs) < 2) if target else None),
                Figure("  worst call", max(errs) if errs else float("nan"), "%",
                       "< 2 %" if target else "(before)", (max(errs) < 2) if target else None),
            ]
    return figures


ALL: dict[str, Any] = {"local_accuracy": run}

if __name__ == "__main__":
    for fig in run():
        print(fig.line())
