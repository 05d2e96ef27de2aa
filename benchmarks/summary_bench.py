"""Compaction summaries measured against real ones: Claude Code's own summaries of the same spans.

For each shared Claude Code session with an automatic compaction (``../shared/data/sessions/
claude-code/``), the span before the compaction is converted to OpenAI messages
(:mod:`benchmarks.claude_code_span`) and each summary mode is run on it. Beside the same figures for
Claude Code's summary (``isCompactSummary``), it prints:

- valid: the project's own check (:func:`engine.context.compaction.check_summary`);
- file recall: of the files Claude's summary names, the share ours names too. A file name is a
  path-like word with a source-file extension (:data:`engine.context.digest.MENTION_RE`); ours names it when
  one of our names equals it or ends with ``/`` + it (Claude often writes ``annotation.ex`` where
  the tool calls had the absolute path). Claude's pointer to its own transcript
  (``~/.claude/projects/…jsonl``, the counterpart of our archive guide) is left out;
- request recall: of the user's requests in the span (what a person typed, not Claude Code's own
  notices), the share whose first 80 characters (blanks collapsed) the summary holds word for word;
- size in tokens (the heuristic, chars × 2 / 5, for every summary alike) and the time to make it.

Modes: ``digest`` as on the bundled model (its 8,192-token window: the digest's lists are shortened
to a quarter of it) and with a 200k window; ``model`` and ``both`` on the bundled model (SmolLM2-135M,
in-process) only with ``CTXBENCH_BENCH_SUMMARY_MODEL=1`` (or ``--model``), bounded: the first
``CTXBENCH_BENCH_MODEL_SESSIONS`` (1) sessions, replies of at most ``CTXBENCH_BENCH_MODEL_MAX_TOKENS``
(128) tokens, ``CTXBENCH_BENCH_MODEL_TIMEOUT`` (600) seconds a call: one call takes minutes on 2
shared cores.

``python -m benchmarks summaries`` prints the figures beside their targets (on the bundled model:
valid every time, ≥ 90 % file recall, every user request, < 1 s) and the table;
``python -m benchmarks.summary_bench`` prints only the table (Markdown, for docs/BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.claude_code_span import CompactedSpan, read_span, user_requests
from benchmarks.engine_bench import Figure, best_of
from engine.context.digest import MENTION_RE
from engine.context.digest_text import build_digest
from engine.context.summaries import DIGEST_SHARE, SummaryMode, digest_part, model_part
from engine.context.summary_call import check_summary
from engine.context.tokens import estimate_text_tokens
from engine.model.messages import Message
from engine.store.config import Settings

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
SESSIONS = SHARED / "sessions" / "claude-code"
LOCAL_WINDOW = 8_192  # the bundled model's n_ctx (Settings.local_n_ctx)
BIG_WINDOW = 200_000
REQUEST_PREFIX = 80
MODEL_TIMEOUT = float(os.environ.get("CTXBENCH_BENCH_MODEL_TIMEOUT", "600"))  # seconds per model call
MODEL_MAX_TOKENS = int(os.environ.get("CTXBENCH_BENCH_MODEL_MAX_TOKENS", "128"))  # the reply's bound
MODEL_SESSIONS = int(os.environ.get("CTXBENCH_BENCH_MODEL_SESSIONS", "1"))  # sessions the model summarises


@dataclass
class Row:
    session: str
    mode: str
    valid: bool
    file_recall: float
    files_claude: int
    request_recall: float
    requests: int
    tokens: int
    seconds: float | None
    note: str = ""


def file_names(text: str) -> set[str]:
    return {n for n in MENTION_RE.findall(text) if "/.claude/projects/" not in n}


def file_recall(reference: str, ours: str) -> tuple[float, int]:
    wanted = file_names(reference)
    have = file_names(ours)
    if not wanted:
        return 1.0, 0
    hit = sum(1 for n in wanted if any(o == n or o.endswith("/" + n.lstrip("./")) for o in have))
    return hit / len(wanted), len(wanted)


def _flat(text: str) -> str:
    return " ".join(text.split())


def request_recall(requests: list[str], summary: str) -> float:
    if not requests:
        return 1.0
    flat = _flat(summary)
    return sum(1 for r in requests if _flat(r)[:REQUEST_PREFIX] in flat) / len(requests)


def _row(span: CompactedSpan, mode: str, text: str, seconds: float | None, note: str = "") -> Row:
    fr, nfiles = file_recall(span.claude_summary, text)
    reqs = user_requests(span.messages)
    return Row(span.session[:8], mode, check_summary(text)[0], fr, nfiles, request_recall(reqs, text), len(reqs),
               estimate_text_tokens(text), seconds, note)


def spans() -> list[CompactedSpan]:
    out = [read_span(p) for p in sorted(SESSIONS.glob("*.jsonl"))]
    return [s for s in out if s is not None and s.claude_summary]


def _claude_prompt_tokens(session: str) -> int:
    """What Claude Code's summarisation call read (its acompact subagent's usage)."""
    best = 0
    for path in (SESSIONS / session / "subagents").glob("agent-acompact-*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            usage = (json.loads(line).get("message") or {}).get("usage") or {}
            n = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                      "cache_read_input_tokens"))
            best = max(best, n)
    return best


def digest_rows(span: CompactedSpan) -> list[Row]:
    rows = [_row(span, "Claude Code's own summary", span.claude_summary, None,
                 f"its call read {_claude_prompt_tokens(span.session):,} prompt tokens")]
    for label, window in (("digest, bundled model (8k window)", LOCAL_WINDOW), ("digest, 200k window", BIG_WINDOW)):
        limit = int(window * DIGEST_SHARE) * 5 // 2

        def make(limit: int = limit) -> str:
            return build_digest(span.messages, max_chars=limit)

        seconds = best_of(make, repeat=3)
        rows.append(_row(span, label, make(), seconds, f"{len(span.messages)} messages"))
    return rows


def model_rows(span: CompactedSpan) -> list[Row]:
    """``model`` and ``both`` on the bundled model (one bounded run each)."""
    from engine.llm import client as llm

    settings = Settings(summary_max_tokens=MODEL_MAX_TOKENS)
    config = llm.config_from_settings(settings)
    summarize = llm.make_summarizer(config)
    budget_chars = max(2_000, (LOCAL_WINDOW - settings.summary_max_tokens - 1_000) * 5 // 2)
    rows = []
    for mode in ("model", "both"):
        m: SummaryMode = mode  # type: ignore[assignment]
        t0 = time.perf_counter()
        limit = int(LOCAL_WINDOW * DIGEST_SHARE) * 5 // 2
        part = digest_part(m, span.messages, "", model=config.model, max_chars=limit)
        call = model_part(part, summarize, span.messages, "", None, settings.summary_max_tokens, budget_chars)
        try:
            done = asyncio.run(asyncio.wait_for(call, MODEL_TIMEOUT))
        except TimeoutError:
            rows.append(Row(span.session[:8], f"{mode}, bundled model", False, 0.0, 0, 0.0, 0, 0,
                            time.perf_counter() - t0, f"stopped after {MODEL_TIMEOUT:.0f} s (bounded run)"))
            continue
        seconds = time.perf_counter() - t0
        note = f"model {done.model_ms / 1000:.0f} s, {done.model_tokens_in:,} tokens in → {done.model_tokens_out} out"
        if done.model_problem:
            note += f"; {done.model_problem}"
        rows.append(_row(span, f"{mode}, bundled model", done.text if done.valid else "", seconds, note))
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| session | summary | valid | file recall | request recall | tokens | time | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = "—" if r.seconds is None else (f"{r.seconds * 1000:.0f} ms" if r.seconds < 1 else f"{r.seconds:.1f} s")
        lines.append(
            f"| {r.session} | {r.mode} | {'yes' if r.valid else 'no'} | {r.file_recall:.0%} of {r.files_claude} | "
            f"{r.request_recall:.0%} of {r.requests} | {r.tokens:,} | {t} | {r.note} |"
        )
    return "\n".join(lines)


def realistic_messages(n: int) -> list[Message]:
    """``n`` messages of real agent work: the shared spans and trajectories, repeated with fresh ids."""
    pool: list[Message] = []
    for span in spans():
        pool += span.messages
    for path in sorted((SHARED / "trajectories").glob("*.traj.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        pool += [m for m in data["messages"] if m.get("role") in ("user", "assistant", "tool")]
    out: list[Message] = []
    copy = 0
    while len(out) < n:
        for m in pool:
            c = dict(m)
            if c.get("tool_call_id"):
                c["tool_call_id"] = f"{c['tool_call_id']}-{copy}"
            if c.get("tool_calls"):
                c["tool_calls"] = [{**tc, "id": f"{tc.get('id')}-{copy}"} for tc in c["tool_calls"]]
            out.append(c)
        copy += 1
    return out[:n]


def bench_summaries() -> list[Figure]:
    rows: list[Row] = []
    for i, span in enumerate(spans()):
        rows += digest_rows(span)
        if os.environ.get("CTXBENCH_BENCH_SUMMARY_MODEL") and i < MODEL_SESSIONS:
            rows += model_rows(span)
    print(table(rows), flush=True)
    bundled = [r for r in rows if r.mode.startswith("digest, bundled")]
    big = list(_digest_10k())
    return [
        Figure("summary: digest valid on the bundled model (sessions)", sum(r.valid for r in bundled), "of "
               + str(len(bundled)), "all", all(r.valid for r in bundled)),
        Figure("summary: digest file recall vs Claude's summary (worst)", min(r.file_recall for r in bundled) * 100,
               "%", "≥ 90 %", min(r.file_recall for r in bundled) >= 0.9),
        Figure("summary: digest user-request recall (worst)", min(r.request_recall for r in bundled) * 100, "%",
               "100 %", all(r.request_recall == 1 for r in bundled)),
        Figure("summary: digest time on a real span (worst)", max(r.seconds or 0 for r in bundled) * 1000, "ms",
               "< 1,000 ms", max(r.seconds or 0 for r in bundled) < 1),
        *big,
    ]


def _digest_10k(n: int = 10_000) -> list[Figure]:
    msgs = realistic_messages(n)
    seconds = best_of(lambda: build_digest(msgs), repeat=3)
    return [Figure(f"summary: digest of {n:,} real agent messages", seconds * 1000, "ms", "< 1,000 ms", seconds < 1)]


ALL: dict[str, Callable[[], list[Figure]]] = {"summaries": bench_summaries}


def main(argv: list[str]) -> int:
    rows: list[Row] = []
    for i, span in enumerate(spans()):
        rows += digest_rows(span)
        if ("--model" in argv or os.environ.get("CTXBENCH_BENCH_SUMMARY_MODEL")) and i < MODEL_SESSIONS:
            rows += model_rows(span)
        print(table(rows), flush=True)  # the table so far (a model run can take minutes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

