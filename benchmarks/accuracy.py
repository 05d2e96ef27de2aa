"""Token accounting accuracy against what a real provider billed.

Each assistant message of the real trajectories carries ``extra.response.usage.prompt_tokens``: the
provider's count for the request made of every message before it plus one ``bash`` tool definition.
For every such call this prints the error of

- the heuristic (SPEC §1: chars × 2 // 5 + 12 per message),
- the exact counter (``litellm.token_counter`` for the run's model),
- the calibrated count (the last call's reported tokens plus the scaled estimate of what was added),
  over both raw estimators,

as median and 90th percentile of |estimate − actual| / actual. Targets: calibrated median < 1 %,
90th percentile < 2 %.

Then the same for the other agents' sessions in ``../shared/data/sessions`` (Claude Code, Codex, OpenHands,
SWE-agent) as ``ctxbench import`` records them — per file, per agent, the first call after each compaction,
over all, with the largest error and the calls over 25 % — and for any more files named as
``<format>:<path>`` on the command line (the sessions the real agents write in ``tests/agents``).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.context.calibration import Calibrator
from engine.context.tokens import estimate_message_tokens, estimate_tool_defs_tokens
from engine.model.messages import Message, to_wire

REPO = Path(__file__).resolve().parent.parent
TRAJECTORIES = REPO.parent / "shared" / "data" / "trajectories"
SESSIONS = REPO.parent / "shared" / "data" / "sessions"

# mini-swe-agent's single tool, as its tool-calling config declares it
BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
            "required": ["command"],
        },
    },
}


@dataclass
class Call:
    request: list[Message]  # wire messages sent (system first)
    actual: int  # provider's prompt_tokens


def load_calls(path: Path) -> tuple[str, list[Call]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    model = str(data.get("info", {}).get("config", {}).get("model", {}).get("model_name", "gpt-4o"))
    messages = [m for m in data["messages"] if m.get("role") in ("system", "user", "assistant", "tool")]
    calls: list[Call] = []
    for i, msg in enumerate(messages):
        usage = ((msg.get("extra") or {}).get("response") or {}).get("usage") or {}
        if msg["role"] == "assistant" and usage.get("prompt_tokens"):
            request = [dict(to_wire(m), id=str(j)) for j, m in enumerate(messages[:i])]
            calls.append(Call(request, int(usage["prompt_tokens"])))
    return model, calls


def _errors(estimates: Sequence[float], actuals: Sequence[int]) -> list[float]:
    return [abs(e - a) / a for e, a in zip(estimates, actuals, strict=True)]


def _p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def calibrated_series(raw: Sequence[int], calls: Sequence[Call]) -> list[float]:
    """Calibrated estimate of every call after the first, using only earlier reports."""
    cal = Calibrator()
    out: list[float] = []
    for k, call in enumerate(calls):
        ids = [str(m["id"]) for m in call.request]
        if k > 0:
            out.append(cal.calibrate(raw[k], ids))
        cal.record(raw[k], call.actual, ids)
    return out


def exact_counter(model: str) -> Callable[[list[Message]], int]:
    from engine.llm import client as llm

    tools_tokens = llm.tools_token_counter(model, [BASH_TOOL])

    def count(request: list[Message]) -> int:
        return llm.token_counter(model, [to_wire(m) for m in request]) + tools_tokens

    return count


@dataclass
class Row:
    name: str
    median: float
    p90: float
    n: int


def measure(paths: Sequence[Path] | None = None, *, exact: bool = True) -> list[Row]:
    paths = list(paths or sorted(TRAJECTORIES.glob("*.traj.json")))
    heur_err: list[float] = []
    exact_err: list[float] = []
    cal_h_err: list[float] = []
    cal_e_err: list[float] = []
    tools_tokens = estimate_tool_defs_tokens([BASH_TOOL])
    for path in paths:
        model, calls = load_calls(path)
        actual = [c.actual for c in calls]
        raw_h = [sum(estimate_message_tokens(m) for m in c.request) + tools_tokens for c in calls]
        heur_err += _errors(raw_h, actual)
        cal_h_err += _errors(calibrated_series(raw_h, calls), actual[1:])
        if exact:
            counter = exact_counter(model)
            raw_e = [counter(c.request) for c in calls]
            exact_err += _errors(raw_e, actual)
            cal_e_err += _errors(calibrated_series(raw_e, calls), actual[1:])
    rows = [Row("heuristic (chars×2/5)", statistics.median(heur_err), _p90(heur_err), len(heur_err))]
    if exact:
        rows.append(Row("exact (litellm.token_counter)", statistics.median(exact_err), _p90(exact_err),
                        len(exact_err)))
    rows.append(Row("calibrated heuristic", statistics.median(cal_h_err), _p90(cal_h_err), len(cal_h_err)))
    if exact:
        rows.append(Row("calibrated exact", statistics.median(cal_e_err), _p90(cal_e_err), len(cal_e_err)))
    return rows


def source_files() -> list[tuple[str, Path]]:
    """The shared sessions of other agents: Claude Code (and its Task subagents), Codex, OpenHands, SWE-agent."""
    claude = sorted((SESSIONS / "claude-code").glob("*.jsonl"))
    claude += [p for p in sorted((SESSIONS / "claude-code").glob("*/subagents/agent-*.jsonl"))
               if not p.name.startswith("agent-acompact")]
    return ([("claude-code", p) for p in claude] + [("codex", p) for p in sorted((SESSIONS / "codex").glob("*.jsonl"))]
            + [("openhands", p) for p in sorted((SESSIONS / "openhands").glob("*.json"))]
            + [("swe-agent", p) for p in sorted((SESSIONS / "swe-agent").glob("*.traj"))])


@dataclass
class SourceCall:
    """One imported call: the calibrated estimate an import records for its request against the provider's figure."""

    call: int
    segment: int
    raw: int  # the uncalibrated estimate
    estimate: int  # what the record draws (system + summary + history + tools)
    actual: int
    window: int
    after_compaction: bool  # the first call of a segment after a compaction
    unlike_file: str = ""  # why the provider's figure counts what the file does not hold ("" : the same basis)

    @property
    def error(self) -> float:
        return abs(self.estimate - self.actual) / self.actual


def source_call_errors(fmt: str, path: Path) -> list[SourceCall]:
    """Every reported call of ``path`` but the session's first (nothing to calibrate on yet), as
    ``ctxbench import`` records it."""
    from engine.ingest import context_records
    from engine.sources.readers import read_source

    recs = context_records(read_source(path, fmt))  # type: ignore[arg-type]
    out: list[SourceCall] = []
    seen = False
    for k, rec in enumerate(recs):
        actual = rec["provider_prompt_tokens"]
        if not actual:
            continue
        if seen:
            estimate = rec["system"] + rec["summary"] + rec["history"] + rec["tools"]
            out.append(SourceCall(k, rec["segment"], rec["raw_prompt_tokens"], estimate, actual, rec["window"],
                                  k > 0 and rec["segment"] != recs[k - 1]["segment"],
                                  str(rec.get("prompt_unlike_file") or "")))
        seen = True
    return out


@dataclass
class SourceRow:
    name: str
    median: float
    p90: float
    max: float
    over_25: int  # calls on the file's basis more than 25 % off
    n: int
    other_basis: int = 0  # calls whose provider figure counts what the file does not hold (labelled so)


def _source_row(name: str, errs: Sequence[float], unlike: Sequence[bool] | None = None) -> SourceRow:
    unlike = unlike if unlike is not None else [False] * len(errs)
    return SourceRow(name, statistics.median(errs), _p90(errs), max(errs),
                     sum(e > 0.25 and not u for e, u in zip(errs, unlike, strict=True)), len(errs), sum(unlike))


def measure_sources(files: Sequence[tuple[str, Path]] | None = None) -> list[SourceRow]:
    """Calibrated estimate of each call's prompt (as an import records it) vs the provider's figure: per session
    file, per agent, the first call after each compaction, and over all."""
    rows: list[SourceRow] = []
    by_agent: dict[str, list[SourceCall]] = {}
    after: list[SourceCall] = []
    for agent, path in source_files() if files is None else files:
        calls = source_call_errors(agent, path)
        if not calls:
            continue
        rows.append(_calls_row(f"{agent} {path.name[:28]}", calls))
        by_agent.setdefault(agent, []).extend(calls)
        after += [c for c in calls if c.after_compaction]
    rows += [_calls_row(f"{agent}: all", calls) for agent, calls in by_agent.items()]
    if after:
        rows.append(_calls_row("first call after a compaction", after))
    every = [c for calls in by_agent.values() for c in calls]
    if every:
        rows.append(_calls_row("all imported calls", every))
    return rows


def _calls_row(name: str, calls: Sequence[SourceCall]) -> SourceRow:
    return _source_row(name, [c.error for c in calls], [bool(c.unlike_file) for c in calls])


def main(argv: Sequence[str] = ()) -> int:
    rows = measure(exact="--no-exact" not in argv)
    print(f"token accuracy vs provider-reported prompt_tokens ({TRAJECTORIES})")
    print(f"{'estimator':34} {'median':>8} {'p90':>8} {'calls':>6}")
    for r in rows:
        print(f"{r.name:34} {r.median:8.2%} {r.p90:8.2%} {r.n:6d}")
    cal = [r for r in rows if r.name.startswith("calibrated")]
    ok = all(r.median < 0.01 and r.p90 < 0.02 for r in cal)
    print(f"target: calibrated median < 1%, p90 < 2%  -> {'MET' if ok else 'NOT MET'}")
    print(f"\nthe same, on the other agents' sessions ({SESSIONS}), as `ctxbench import` records them")
    extra = [(a.partition(":")[0], Path(a.partition(":")[2])) for a in argv if ":" in a and not a.startswith("-")]
    print(f"{'session':44} {'median':>8} {'p90':>8} {'max':>8} {'>25%':>5} {'calls':>6} {'other basis':>11}")
    for s in measure_sources(source_files() + extra):
        print(f"{s.name:44} {s.median:8.2%} {s.p90:8.2%} {s.max:8.1%} {s.over_25:5d} {s.n:6d} {s.other_basis:11d}")
    print("(>25%: calls on the file's basis; other basis: calls whose provider figure counts what the file does not "
          "hold — a web search's results, a request rebuilt on resuming, files re-attached after a compaction — "
          "labelled so in the record)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
