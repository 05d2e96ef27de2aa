"""Opening a long session is linear in its calls (issue 28): ``python -m benchmarks long-chain``.

A Claude Code session made of a real shared one copied with fresh ids into **one long chain with one
compaction** (:class:`LongChainCopies`: the first copy is the real session whole, compaction included; every
later copy leaves out the ``compact_boundary`` line and its summary and hangs its post-compaction part off the
line the compaction followed, so the context keeps growing call after call). Sizes 33 MB (~2,600 calls) and
100 MB (~8,000 calls), made once into ``/tmp/ctxbench-longchain`` and reused. Each figure in a fresh process:

- import: :func:`engine.ingest.import_source` (what ``ctxbench import`` does), seconds and seconds per call;
- open: the Qt-free service's ``open_source`` → ``SessionLoaded`` (after a warm-up open of a small file);
- linearity: seconds per call at 100 MB ÷ at 33 MB (target ≤ 1.2: linear).

Gemini CLI's reader (``engine.sources.gemini_cli.read_gemini_cli``) on generated sessions of 1,000, 2,000 and
4,000 turns (a user prompt, a tool call and its result, an answer with tokens per turn), and its time per turn
at 4,000 ÷ at 1,000.

Issue 28's figures on the code before (its own long chain): 33 MB imported in 5.3 s and opened in 6.2 s, 100 MB
opened in 77 s; Gemini CLI 1,000 / 2,000 / 4,000 turns read in 2.7 / 11 / 55 s. ``docs/BENCHMARKS.md`` has this
benchmark's figures before → after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.bigsession import CLAUDE_SOURCE, ClaudeCopies
from benchmarks.engine_bench import MB, Figure

REPO = Path(__file__).resolve().parent.parent
FOLDER = Path("/tmp/ctxbench-longchain")
SIZES_MB = (33, 100)
GEMINI_TURNS = (1000, 2000, 4000)
OPEN_TARGET_S = 5.0  # 100 MB opened through the service "within a few seconds"
LINEAR_TARGET = 1.2  # time per call at the larger size ÷ at the smaller


class LongChainCopies(ClaudeCopies):
    """A Claude Code session's lines copied into one chain with one compaction: copy 0 is the session as it is;
    every later copy has no ``compact_boundary`` line nor the summary after it, and the line that followed the
    summary hangs off the compaction's ``logicalParentUuid`` (the line before it), so nothing is compacted
    again and the context keeps growing."""

    def __init__(self, source: Path = CLAUDE_SOURCE, seed: int = 0) -> None:
        super().__init__(source, seed)
        whole = self.lines
        drop: set[int] = set()
        rewire: dict[str, str] = {}  # the uuid of a dropped line -> the parent it stood for
        for i, raw in enumerate(whole):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            if obj.get("subtype") == "compact_boundary" and isinstance(obj.get("uuid"), str):
                drop.add(i)
                rewire[obj["uuid"]] = str(obj.get("logicalParentUuid") or "")
            elif obj.get("isCompactSummary") and isinstance(obj.get("uuid"), str):
                drop.add(i)
                rewire[obj["uuid"]] = rewire.get(str(obj.get("parentUuid")), "")
        chained: list[bytes] = []
        for i, raw in enumerate(whole):
            if i in drop:
                continue
            for old, new in rewire.items():
                if new and b'"parentUuid":"' + old.encode() + b'"' in raw:
                    raw = raw.replace(b'"parentUuid":"' + old.encode() + b'"', b'"parentUuid":"' + new.encode() + b'"')
            chained.append(raw)
        self.whole, self.chained = whole, chained  # the root line comes before the compaction: same index
        if any(i <= self.root for i in drop):
            raise ValueError(f"{source}: a compaction before the conversation's root")

    def copy(self) -> list[bytes]:
        if self.copies == 0:
            self.lines = self.whole
            out = super().copy()
            self.lines = self.chained
            return out
        return super().copy()


def make_long_chain(dest: Path, size_bytes: int, seed: int = 0, source: Path = CLAUDE_SOURCE) -> Path:
    """Write a one-compaction long chain of about ``size_bytes`` (cut at a line boundary past it); ``dest``."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    part = dest.with_suffix(".part")
    with open(part, "wb") as fh:
        for raw in LongChainCopies(source, seed):
            fh.write(raw)
            written += len(raw)
            if written >= size_bytes:
                break
    part.replace(dest)
    return dest


def cached_long_chain(size_mb: float, seed: int = 0, folder: Path = FOLDER) -> Path:
    path = folder / f"longchain-{size_mb:g}MB-seed{seed}.jsonl"
    if not path.exists() or path.stat().st_size < size_mb * MB:
        make_long_chain(path, int(size_mb * MB), seed)
    return path


def make_gemini_session(dest: Path, turns: int) -> Path:
    """A Gemini CLI session file (0.61's JSON lines) of ``turns`` turns: a prompt; the model's tool call, its
    record written first without then again with its ``tokens`` (a record that grows); the tool's result; the
    answer with its ``tokens``; ``dest``."""
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    stamp = t0.isoformat().replace("+00:00", "Z")
    out: list[dict[str, Any]] = [{"sessionId": "00000000-0000-4000-8000-0000000bench", "projectHash": "0" * 64,
                                  "startTime": stamp, "lastUpdated": stamp, "kind": "main"}]
    prompt = 1200
    for k in range(turns):
        ts = (t0 + timedelta(seconds=10 * k)).isoformat().replace("+00:00", "Z")
        out.append({"id": f"u{k}", "timestamp": ts, "type": "user", "content": [{"text": f"step {k}: list files"}]})
        call = {"id": f"call-{k}", "name": "list_directory", "args": {"dir_path": "."}, "status": "success",
                "timestamp": ts}
        prompt += 180
        first = {"id": f"g{k}a", "timestamp": ts, "type": "gemini", "content": "", "toolCalls": [call],
                 "thoughts": [], "model": "gemini-2.5-flash"}
        out.append(first)
        out.append({**first, "tokens": {"input": prompt, "output": 20, "cached": prompt // 2, "thoughts": 0,
                                        "tool": 0, "total": prompt + 20}})
        out.append({"id": f"r{k}", "timestamp": ts, "type": "user", "content": [
            {"functionResponse": {"id": f"call-{k}", "name": "list_directory",
                                  "response": {"output": "a.txt\nb.txt\n" * 20}}}]})
        prompt += 160
        out.append({"id": f"g{k}b", "timestamp": ts, "type": "gemini", "content": f"Done with step {k}.",
                    "thoughts": [], "model": "gemini-2.5-flash",
                    "tokens": {"input": prompt, "output": 12, "cached": prompt // 2, "thoughts": 0, "tool": 0,
                               "total": prompt + 12}})
        out.append({"$set": {"lastUpdated": ts}})
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(json.dumps(o) + "\n" for o in out))
    return dest


CODEX_SOURCE = REPO.parent / "shared" / "data" / "sessions" / "codex" / \
    "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
CODEX_CALLS = (1000, 8000)


def make_codex_rollout(dest: Path, calls: int, source: Path = CODEX_SOURCE) -> Path:
    """A Codex rollout of about ``calls`` calls made of the shared 1 MB rollout (286 calls, one compaction) copied
    into one session: copy 0 whole; every later copy without its ``session_meta`` and its compaction (so the context
    keeps growing), its tool call ids made its own and its ``token_count`` totals carried on from the copy before
    (a repeated total is no new call); ``dest``."""
    lines = [json.loads(raw) for raw in source.read_bytes().splitlines() if raw.strip()]
    last: dict[str, Any] = {}
    for obj in lines:
        info = (obj.get("payload") or {}).get("info") if obj.get("type") == "event_msg" else None
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            last = info["total_token_usage"]
    out: list[str] = []
    made, copy, seen = 0, 0, None
    while made < calls:
        for obj in lines:
            payload = obj.get("payload") or {}
            kind = obj.get("type")
            if copy and (kind in ("session_meta", "compacted") or payload.get("type") == "context_compacted"):
                continue
            obj = json.loads(json.dumps(obj))
            payload = obj.get("payload") or {}
            if copy and isinstance(payload.get("call_id"), str):
                payload["call_id"] += f"-copy{copy}"
            info = payload.get("info") if kind == "event_msg" and payload.get("type") == "token_count" else None
            if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
                total = info["total_token_usage"]
                if copy:
                    total.update({k: v + copy * int(last.get(k) or 0) for k, v in total.items() if isinstance(v, int)})
                made += total != seen
                seen = dict(total)
            out.append(json.dumps(obj))
            if made >= calls:
                break
        copy += 1
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(out) + "\n")
    return dest


# ---------------------------------------------------------------------------------------------- children


def _import_child(path: str) -> dict[str, Any]:
    from engine.ingest import import_source
    from engine.store.config import Settings

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        report = import_source(Path(path), session_dir=Path(tmp) / "s", settings=Settings().replace(
            estimator="heuristic"))
        return {"s": time.perf_counter() - t0, "calls": report.calls}


def _open_child(path: str) -> dict[str, Any]:
    import asyncio

    from benchmarks.source_view_bench import _service
    from engine.workbench import events as ev

    loaded: list[tuple[float, int]] = []

    def on_event(e: Any) -> None:
        if isinstance(e, ev.SessionLoaded):
            loaded.append((time.perf_counter(), len(e.view.timeline)))

    async def run(tmp: Path) -> dict[str, Any]:
        wb = _service(tmp, on_event)
        warm = REPO.parent / "shared" / "data" / "sessions" / "claude-code" / "tool_heavy.jsonl"
        if warm.exists():
            await wb.open_source(warm)
        t0 = time.perf_counter()
        await wb.open_source(Path(path))
        after = [(t, n) for t, n in loaded if t >= t0]
        if not after:
            raise RuntimeError("the session did not load")
        return {"s": after[-1][0] - t0, "calls": after[-1][1]}

    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(run(Path(tmp)))


def _gemini_child(path: str) -> dict[str, Any]:
    from engine.sources.gemini_cli import read_gemini_cli

    best, calls = float("inf"), 0
    for _ in range(3):  # the best of three: a shared machine's noise is larger than a small read
        t0 = time.perf_counter()
        src = read_gemini_cli(Path(path))
        best, calls = min(best, time.perf_counter() - t0), len(src.calls)
    return {"s": best, "calls": calls}


CHILDREN: dict[str, Callable[[str], dict[str, Any]]] = {
    "import": _import_child, "open": _open_child, "gemini": _gemini_child}


def _child(kind: str, path: Path, timeout: float = 1200) -> dict[str, Any]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.longchain_bench", kind, str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise RuntimeError(f"child {kind} failed: {proc.stderr.strip()[-400:]}")


# ---------------------------------------------------------------------------------------------- figures


def bench_long_chain(sizes: tuple[float, ...] = SIZES_MB, folder: Path = FOLDER) -> list[Figure]:
    figs: list[Figure] = []
    per_call: dict[str, list[float]] = {"import": [], "open": []}
    for mb in sizes:
        path = cached_long_chain(mb, folder=folder)
        for kind in ("import", "open"):
            r = _child(kind, path)
            per_call[kind].append(r["s"] / max(1, r["calls"]))
            target = f"≤ {OPEN_TARGET_S:g} s" if kind == "open" and mb >= 100 else ""
            ok = r["s"] <= OPEN_TARGET_S if target else None
            figs.append(Figure(f"long chain {mb:g} MB ({r['calls']:,} calls): {kind}", r["s"], "s", target, ok))
    if len(sizes) > 1:
        for kind, values in per_call.items():
            ratio = values[-1] / values[0] if values[0] > 0 else float("nan")
            figs.append(Figure(f"long chain {kind}: s/call at {sizes[-1]:g} MB ÷ at {sizes[0]:g} MB", ratio, "×",
                               f"≤ {LINEAR_TARGET:g} (linear)", ratio <= LINEAR_TARGET))
    return figs


def bench_gemini(turns: tuple[int, ...] = GEMINI_TURNS) -> list[Figure]:
    figs: list[Figure] = []
    per_turn: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in turns:
            path = make_gemini_session(Path(tmp) / f"session-{n}.json", n)
            r = _child("gemini", path)
            per_turn.append(r["s"] / n)
            figs.append(Figure(f"Gemini CLI {n:,} turns ({r['calls']:,} calls): read", r["s"], "s", "", None))
    if len(turns) > 1:
        ratio = per_turn[-1] / per_turn[0] if per_turn[0] > 0 else float("nan")
        figs.append(Figure(f"Gemini CLI: s/turn at {turns[-1]:,} ÷ at {turns[0]:,}", ratio, "×",
                           f"≤ {LINEAR_TARGET:g} (linear)", ratio <= LINEAR_TARGET))
    return figs


def bench_codex(calls: tuple[int, ...] = CODEX_CALLS) -> list[Figure]:
    """Codex: import and open (each in a fresh process) of rollouts of 1,000 and 8,000 calls, linear in calls."""
    if not CODEX_SOURCE.exists():
        return [Figure(f"Codex long rollout: SKIPPED (no {CODEX_SOURCE.name})", float("nan"), "", "", None)]
    figs: list[Figure] = []
    per_call: dict[str, list[float]] = {"import": [], "open": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in calls:
            name = f"rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-{n:012d}.jsonl"
            path = make_codex_rollout(Path(tmp) / "sessions" / name, n)
            for kind in ("import", "open"):
                r = _child(kind, path)
                per_call[kind].append(r["s"] / max(1, r["calls"]))
                figs.append(Figure(f"Codex {n:,} calls ({r['calls']:,} read): {kind}", r["s"], "s", "", None))
    for kind, values in per_call.items():
        ratio = values[-1] / values[0] if len(values) > 1 and values[0] > 0 else float("nan")
        figs.append(Figure(f"Codex {kind}: s/call at {calls[-1]:,} ÷ at {calls[0]:,}", ratio, "×",
                           f"≤ {LINEAR_TARGET:g} (linear)", ratio <= LINEAR_TARGET))
    return figs


def bench_all() -> list[Figure]:
    return [*bench_long_chain(), *bench_gemini(), *bench_codex()]


ALL = {"long-chain": bench_all}


if __name__ == "__main__":
    kind, arg = sys.argv[1], sys.argv[2]
    if kind == "make":
        print(cached_long_chain(float(arg)))
    elif kind == "codex":
        for figure in bench_codex():
            print(figure.line(), flush=True)
    else:
        print(json.dumps(CHILDREN[kind](arg)))
