"""Engine benchmarks: figures printed beside their targets, ratios measured in the same run.

Each function returns a list of :class:`Figure`; ``python -m benchmarks`` prints them all.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.context.plan import force_compression, plan_compaction
from engine.context.tokens import TokenCache, estimate_message_tokens
from engine.model.messages import Message, new_message, tool_call

MB = 1024 * 1024


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    target: str
    ok: bool | None  # None: reported only, no target

    def line(self) -> str:
        mark = {True: "ok", False: "MISSED", None: "--"}[self.ok]
        return f"{self.name:58} {self.value:12.3f} {self.unit:8} {self.target:26} {mark}"


def compiled(repo: Path) -> None:
    """The bytecode of ``repo``'s own modules written, as an installed package has it (pip compiles what it
    installs; ``make run`` compiles the tree): the processes a benchmark times then load it instead of compiling
    every module at every start where ``PYTHONDONTWRITEBYTECODE`` is set (0.1–0.15 s of each process here)."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "compileall", "-q", "app", "engine", "widgets", "benchmarks"], cwd=repo,
                   check=True, stdout=subprocess.DEVNULL)


def best_of(fn: Callable[[], Any], repeat: int = 7, number: int = 1) -> float:
    """Best wall time of ``number`` calls, over ``repeat`` rounds, in seconds per call."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def make_history(n: int, seed_text: str = "lorem ipsum dolor sit amet ") -> list[Message]:
    """A realistic agent history: turns of user → assistant(tool call) → tool → assistant."""
    out: list[Message] = []
    i = 0
    while len(out) < n:
        out.append(new_message("user", f"Step {i}: " + seed_text * 8))
        cid = f"call_{i}"
        out.append(new_message("assistant", "Let me look.", tool_calls=[tool_call(cid, "read_file",
                                                                                   json.dumps({"path": f"f{i}.py"}))]))
        out.append(new_message("tool", (seed_text * 40 + "\n") * 5, tool_call_id=cid, name="read_file"))
        out.append(new_message("assistant", "Done with step " + str(i) + ". " + seed_text * 4))
        i += 1
    return out[:n]


def _budget_rig(tmp: Path, n: int) -> tuple[Any, Any, Any]:
    """A session of ``n`` messages and the compactor and request the agent checks before each call."""
    from engine.agent import default_system_prompt, default_tools
    from engine.context.compaction import Compactor
    from engine.context.conversation import Session
    from engine.context.request import SessionRequest
    from engine.model.snapshot import WindowInfo
    from engine.store.config import Settings
    from engine.store.fsutil import append_lines

    path = tmp / "s"
    Session.create(path, "bench").close()
    append_lines(path / "history.jsonl", make_history(n))
    session = Session.load(path)
    system = default_system_prompt()
    compactor = Compactor(session, Settings(), None, system_prompt=system, tools=default_tools(),
                          window=WindowInfo(10**9, 4096, "model"))
    return session, compactor, SessionRequest(session, system)


def _time_budget_checks(n: int, calibrated: bool, rounds: int) -> tuple[float, float]:
    """(median, full re-estimate median) seconds of ``Compactor.over_budget`` on the agent's path:
    one message appended, then (calibrated) a provider report recorded, then the check."""
    with tempfile.TemporaryDirectory() as tmp:
        session, compactor, request = _budget_rig(Path(tmp), n)
        fast: list[float] = []
        full: list[float] = []
        for i in range(rounds):
            session.append(new_message("user", f"one more question about the code ({i})"))
            if calibrated:
                raw = compactor.snapshot()
                ids = [str(m.get("id")) for m in session.messages]
                session.calibrator.record(raw.raw_prompt_tokens, raw.raw_prompt_tokens * 11 // 10, ids,
                                          (raw.system, raw.summary, raw.tools))
            t0 = time.perf_counter()
            decision = compactor.over_budget(request)
            fast.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert compactor.over_budget_full(request) == decision
            full.append(time.perf_counter() - t0)
        session.close()
    return statistics.median(fast), statistics.median(full)


def bench_budget_check(n: int = 10_000, rounds: int = 25) -> list[Figure]:
    """The agent's real pre-call check (``Compactor.over_budget`` with the session's request), at
    ``n`` messages, before the first provider report (uncalibrated) and after one (calibrated)."""
    out: list[Figure] = []
    for calibrated in (False, True):
        t, t_full = _time_budget_checks(n, calibrated, rounds)
        label = "calibrated" if calibrated else "uncalibrated"
        out += [
            Figure(f"pre-call budget check, {n} msgs, {label}", t * 1e3, "ms", "< 1 ms", t < 1e-3),
            Figure("  building + re-estimating the request instead", t_full * 1e3, "ms", "(baseline)", None),
        ]
    return out


def bench_plan(n: int = 10_000) -> list[Figure]:
    history = make_history(n)
    counts = [estimate_message_tokens(m) for m in history]
    total = sum(counts)

    def plan() -> Any:
        return plan_compaction(history, counts, window=total, system_tokens=500, summary_tokens=0,
                               tools_tokens=300, max_tokens=1000, threshold_ratio=0.8, reserve_tokens=total // 10)

    def emergency() -> Any:
        return force_compression(history, "previous summary")

    t_plan = best_of(plan)
    t_em = best_of(emergency)
    assert plan().needed
    return [
        Figure(f"compaction plan, {n} msgs", t_plan * 1e3, "ms", "< 20 ms", t_plan < 0.020),
        Figure(f"emergency compression, {n} msgs", t_em * 1e3, "ms", "< 20 ms", t_em < 0.020),
    ]


def bench_heuristic_throughput(n: int = 10_000) -> list[Figure]:
    history = make_history(n)

    def lengths_only() -> int:
        # the floor: merely measuring the strings' lengths in Python
        total = 0
        for m in history:
            c = m.get("content")
            if isinstance(c, str):
                total += len(c)
            for call in m.get("tool_calls") or ():
                total += len(call["function"]["arguments"])
        return total

    def heuristic() -> int:
        return sum(map(estimate_message_tokens, history))

    t_len = best_of(lengths_only)
    t_h = best_of(heuristic)
    ratio = t_h / t_len
    per_msg = t_h / n * 1e6
    return [
        Figure(f"heuristic estimate, {n} msgs", t_h * 1e3, "ms", "", None),
        Figure("  per message", per_msg, "us", "", None),
        Figure("  cost vs measuring string lengths", ratio, "x", "<= 3x", ratio <= 3),
    ]


def bench_exact(n: int = 2_000) -> list[Figure]:
    from engine.llm import client as llm

    history = make_history(n)
    model = "gpt-4o"
    llm.token_counter(model, [{"role": "user", "content": "warm"}])  # import + encoder load

    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")

    def direct() -> int:
        total = 0
        for m in history:
            c = m.get("content")
            if isinstance(c, str):
                total += len(enc.encode(c, disallowed_special=()))
            for call in m.get("tool_calls") or ():
                total += len(enc.encode(call["function"]["arguments"], disallowed_special=()))
        return total

    def via_litellm() -> int:
        from engine.model.messages import to_wire

        return sum(llm.token_counter(model, [to_wire(m)]) for m in history)

    cache = TokenCache(llm_estimator(model))

    def cached_second_pass() -> int:
        return cache.total(history)

    t_direct = best_of(direct, repeat=3)
    t_lite = best_of(via_litellm, repeat=3)
    cache.total(history)
    t_cached = best_of(cached_second_pass, repeat=5)
    return [
        Figure(f"exact count via engine.llm.client.token_counter, {n} msgs", t_lite * 1e3, "ms", "", None),
        Figure("  tiktoken called directly (same texts)", t_direct * 1e3, "ms", "(baseline)", None),
        Figure("  ratio engine/direct", t_lite / t_direct, "x", "report", None),
        Figure("  unchanged history again (per-message cache)", t_cached * 1e3, "ms", "", None),
    ]


def llm_estimator(model: str) -> Any:
    from engine.context.tokens import ExactEstimator

    return ExactEstimator(model)


def bench_offload(size_mb: int = 100) -> list[Figure]:
    from engine.context.offload import Offloader
    from engine.store.config import Settings

    line = ("x" * 99 + "\n").encode()
    text = (line * (size_mb * MB // len(line))).decode()
    size = len(text.encode())
    with tempfile.TemporaryDirectory() as tmp:
        session_dir = Path(tmp)
        history = [
            new_message("user", "run it"),
            new_message("assistant", None, tool_calls=[tool_call("c1", "run_shell", "{}")]),
            new_message("tool", text, tool_call_id="c1", name="run_shell"),
        ]
        del text
        offloader = Offloader(session_dir, Settings())
        lags: list[float] = []

        async def probe(stop: asyncio.Event) -> None:
            interval = 0.005
            while not stop.is_set():
                t0 = time.perf_counter()
                await asyncio.sleep(interval)
                lags.append(time.perf_counter() - t0 - interval)

        async def run() -> float:
            stop = asyncio.Event()
            task = asyncio.create_task(probe(stop))
            await asyncio.sleep(0.02)
            t0 = time.perf_counter()
            await offloader.offload_step(history)
            elapsed = time.perf_counter() - t0
            stop.set()
            await task
            return elapsed

        gc.collect()
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        elapsed = asyncio.run(run())
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        extra = (peak - base) / size
        written = sum(p.stat().st_size for p in (session_dir / "tool_results").glob("*.txt"))
    max_lag = max(lags) * 1e3 if lags else 0.0
    return [
        Figure(f"offload a {size_mb} MB tool result", elapsed, "s", "", None),
        Figure("  peak extra memory / result size", extra, "x", "< 2x", extra < 2),
        Figure("  worst event-loop lag while offloading", max_lag, "ms", "< 50 ms", max_lag < 50),
        Figure("  bytes written == result size", float(written == size), "bool", "1", written == size),
    ]


def bench_session_load(n: int = 10_000, snapshots: int = 1_000) -> list[Figure]:
    from engine.context.conversation import Session
    from engine.context.snapshots import build_snapshot
    from engine.model.snapshot import WindowInfo
    from engine.store.fsutil import append_lines

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s"
        session = Session.create(path, "bench")
        history = make_history(n)
        append_lines(path / "history.jsonl", history)
        counts = [estimate_message_tokens(m) for m in history[:50]]
        snap = build_snapshot(window=WindowInfo(128_000, 4096, "model"), system_tokens=500, summary_tokens=0,
                              tools_tokens=300, history=history[:50], history_counts=counts,
                              estimator_name="heuristic", threshold_ratio=0.8)
        record = snap.to_json()
        record.pop("message_tokens")
        append_lines(path / "events.jsonl", [dict(record, type="context", call_index=i) for i in range(snapshots)])
        session.close()

        def load() -> int:
            s = Session.load(path)
            events = s.read_events()
            s.close()
            return len(s.messages) + len(events)

        assert load() == n + snapshots
        t = best_of(load, repeat=3)
    return [Figure(f"load session: {n} msgs + {snapshots} snapshots", t * 1e3, "ms", "< 1000 ms", t < 1.0)]


ALL: dict[str, Callable[[], list[Figure]]] = {
    "budget": bench_budget_check,
    "plan": bench_plan,
    "heuristic": bench_heuristic_throughput,
    "exact": bench_exact,
    "offload": bench_offload,
    "load": bench_session_load,
}


def median(values: list[float]) -> float:
    return statistics.median(values)
