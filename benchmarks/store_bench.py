"""Timings that used to be single-shot assertions inside tests (the tests now check what comes back
and where the work runs; the figures live here, beside their targets).

- ``truncate``: cutting a 50 MB tool output to 1,000 bytes (tests/engine/test_offload.py);
- ``search_loop``: the longest the event loop waits while ``search_text`` gives up on a pattern that
  backtracks for ever (tests/engine/test_fuzz_inputs.py);
- ``local_loop``: how often the event loop ticks while the bundled model generates twice
  (tests/engine/test_local_model.py; loads the real model).

The 100 MB offload's longest loop wait is ``offload`` in :mod:`benchmarks.engine_bench`.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.engine_bench import Figure, best_of

TICK = 0.01


class _Ticker:
    """Counts event-loop ticks of ``TICK`` seconds and keeps the longest gap between two."""

    def __init__(self) -> None:
        self.ticks = 0
        self.longest = 0.0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            self.ticks += 1
            self.longest = max(self.longest, now - last)
            last = now

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


def bench_truncate() -> list[Figure]:
    from engine.context.offload import truncate_text_output

    big = "a" * 50_000_000
    seconds = best_of(
        lambda: truncate_text_output(big, start_line=1, total_lines=1, max_bytes=1000, file_path="p"), repeat=7
    )
    return [Figure("truncate a 50 MB output to 1,000 bytes", seconds * 1e3, "ms", "< 50 ms", seconds < 0.05)]


def bench_search_loop() -> list[Figure]:
    from engine.tools.registry import ToolBox

    async def run(folder: Path) -> tuple[float, float, str]:
        tb = ToolBox(folder, folder / "session")
        ticker = _Ticker()
        ticker.start()
        t0 = time.perf_counter()
        res = await tb.run("search_text", json.dumps({"pattern": "(a|aa)+$"}))
        took = time.perf_counter() - t0
        await ticker.stop()
        return ticker.longest, took, res.text

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "a.txt").write_text("a" * 60 + "b\n" + "aaa\n")
        longest, took, text = asyncio.run(run(folder))
    given_up = "backtracks too much" in text
    return [
        Figure("search_text (a|aa)+$: given up after", took, "s", "--", None),
        Figure("search_text (a|aa)+$: longest event-loop wait", longest * 1e3, "ms", "< 500 ms",
               given_up and longest < 0.5),
    ]


def bench_local_loop() -> list[Figure]:
    from engine.llm import client as llm
    from engine.llm.client import LLMConfig
    from engine.llm.local_model import LOCAL_MODEL

    question = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    config = LLMConfig(model=LOCAL_MODEL, local_threads=1, max_tokens=40, local_n_ctx=2048, temperature=0.0)

    async def run() -> tuple[int, float, float]:
        await llm.stream_chat(config, question)  # load the model first: loading is not generation
        ticker = _Ticker()
        ticker.start()
        t0 = time.perf_counter()
        await asyncio.gather(llm.stream_chat(config, question), llm.stream_chat(config, question))
        elapsed = time.perf_counter() - t0
        await ticker.stop()
        return ticker.ticks, elapsed, ticker.longest

    ticks, elapsed, longest = asyncio.run(run())
    ratio = ticks / (elapsed / TICK) if elapsed > 0 else 0.0
    return [
        Figure("local model: two generations took", elapsed, "s", "--", None),
        Figure("local model: loop ticks / ticks possible while generating", ratio, "ratio", ">= 0.3", ratio >= 0.3),
        Figure("local model: longest event-loop wait while generating", longest * 1e3, "ms", "--", None),
    ]


ALL: dict[str, Callable[[], list[Figure]]] = {
    "truncate": bench_truncate,
    "search_loop": bench_search_loop,
    "local_loop": bench_local_loop,
}

if __name__ == "__main__":
    for bench in ALL.values():
        for fig in bench():
            print(fig.line())
