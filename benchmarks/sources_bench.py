"""Reading other agents' sessions, beside the tools people use on these files, measured in one run.

- ccusage (npm, version 16 runs on Node 20): ``ccusage session --json --offline`` over a Claude Code
  ``projects`` folder built from the shared sessions, against ``ctxbench sources`` on the same folder;
- claude-code-log (PyPI): converting the largest session, against ``ctxbench import`` of it.

Both tools are installed by this benchmark only, into a temporary folder (``npm install`` and a
temporary venv), never as the app's dependencies; if an install fails the figure says so. They run
with a temporary HOME. Targets (issue 12): import of the ~3 MB session with its subagents < 0.5 s;
``sources`` faster than ccusage and a re-scan with nothing changed < 50 ms; a 100 MB session (a real
one's lines repeated) read in < 5 s with peak memory < 3× the file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import MB, Figure, best_of

REPO = Path(__file__).resolve().parent.parent
SESSIONS = REPO.parent / "shared" / "data" / "sessions"
CLAUDE = SESSIONS / "claude-code"
CODEX = SESSIONS / "codex"
LARGEST = CLAUDE / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
INSTALL_TIMEOUT = 600


def _run(cmd: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 600) -> tuple[float, str]:
    """Wall time of one process and its stdout; RuntimeError with its stderr when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return took, proc.stdout


def _best_process(cmd: list[str], env: dict[str, str], repeat: int = 3, prepare: Callable[[], None] | None = None,
                  cwd: Path | None = None) -> tuple[float, str]:
    best, out = float("inf"), ""
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        took, out = _run(cmd, env, cwd)
        best = min(best, took)
    return best, out


def build_projects(root: Path) -> Path:
    """A Claude Code config folder (``<root>/projects/<project>/``) holding every shared session."""
    project = root / "projects" / "-home-user-projects-spotter"
    project.mkdir(parents=True)
    for path in sorted(CLAUDE.glob("*.jsonl")):
        shutil.copyfile(path, project / path.name)
        if path.with_suffix("").is_dir():
            shutil.copytree(path.with_suffix(""), project / path.stem)
    return root


def _tool_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "CODEX_"))}
    env.update(HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    return env


def install_ccusage(tmp: Path) -> Path:
    prefix = tmp / "npm"
    prefix.mkdir()
    _run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), "ccusage@16"],
         _tool_env(tmp / "home"), timeout=INSTALL_TIMEOUT)
    return prefix / "node_modules" / ".bin" / "ccusage"


def install_claude_code_log(tmp: Path) -> Path:
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], _tool_env(tmp / "home"), timeout=INSTALL_TIMEOUT)
    _run([str(venv / "bin" / "pip"), "install", "-q", "claude-code-log"], _tool_env(tmp / "home"),
         timeout=INSTALL_TIMEOUT)
    return venv / "bin" / "claude-code-log"


def _ctxbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


def bench_import(tmp: Path) -> list[Figure]:
    from engine.ingest import import_source

    runs = iter(range(100))

    def once() -> None:
        import_source(LARGEST, session_dir=tmp / "imports" / f"s{next(runs)}")

    size = sum(p.stat().st_size for p in [LARGEST, *LARGEST.with_suffix("").rglob("*.jsonl")])
    took = best_of(once, repeat=5)
    figs = [Figure(f"import {size / MB:.1f} MB Claude Code session + subagents (in process)", took, "s",
                   "< 0.5 s", took < 0.5)]
    def fresh() -> None:
        shutil.rmtree(tmp / "imports" / "p", ignore_errors=True)

    cmd = _ctxbench("import", str(LARGEST), "--session", str(tmp / "imports" / "p"))
    proc, _ = _best_process(cmd, _tool_env(tmp / "home"), prepare=fresh, cwd=REPO)
    figs.append(Figure("ctxbench import, the same, whole process", proc, "s", "reported", None))
    return figs


def bench_claude_code_log(tmp: Path, ctx_import: float) -> list[Figure]:
    try:
        tool = install_claude_code_log(tmp)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return [Figure(f"claude-code-log NOT INSTALLED ({str(exc)[:60]})", float("nan"), "s", "", None)]
    work = tmp / "ccl"
    work.mkdir()
    shutil.copyfile(LARGEST, work / LARGEST.name)
    took, _ = _best_process([str(tool), "convert", str(work / LARGEST.name), "-o", str(work / "out.html")],
                            _tool_env(tmp / "home"))
    return [Figure("claude-code-log convert, the same session, whole process", took, "s",
                   f"ctxbench import {took / ctx_import:.1f}x faster", ctx_import < took)]


def bench_sources(tmp: Path) -> list[Figure]:
    from engine.sources.discovery import scan_sources
    from engine.store.config import Settings

    config = build_projects(tmp / "claude-config")
    env = _tool_env(tmp / "home")
    env.update(CLAUDE_CONFIG_DIR=str(config), CODEX_HOME=str(tmp / "no-codex"), CTXBENCH_DATA_DIR=str(tmp / "data"))
    index = tmp / "data" / "sources-index.json"
    fake = {"HOME": str(tmp / "home"), "CLAUDE_CONFIG_DIR": str(config), "CODEX_HOME": str(tmp / "no-codex")}
    cold = best_of(lambda: scan_sources(Settings(), refresh=True, env=fake, index=index), repeat=5)
    warm = best_of(lambda: scan_sources(Settings(), env=fake, index=index), repeat=7)
    entries = scan_sources(Settings(), env=fake, index=index)
    proc, _ = _best_process(_ctxbench("sources", "--json", "--refresh"), env, cwd=REPO)
    figs = [
        Figure(f"sources: scan {len(entries)} sessions, no index (in process)", cold, "s", "reported", None),
        Figure("sources: re-scan with nothing changed (in process)", warm * 1000, "ms", "< 50 ms", warm < 0.05),
        Figure("ctxbench sources --json --refresh, whole process", proc, "s", "reported", None),
    ]
    try:
        tool = install_ccusage(tmp)
        took, report = _best_process([str(tool), "session", "--json", "--offline"], env)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return [*figs, Figure(f"ccusage NOT INSTALLED OR FAILED ({str(exc)[:60]})", float("nan"), "s", "", None)]
    figs.append(Figure("ccusage session --json --offline, same folder, whole process", took, "s",
                       f"ctxbench {took / proc:.1f}x faster", proc < took))
    figs += _cross_check(json.loads(report), entries)
    return figs


def _cross_check(report: dict[str, Any], entries: list[Any]) -> list[Figure]:
    """ccusage's token totals next to ours, over the sessions and their subagent files (its prompt side
    must agree; its output side keeps the first, placeholder output_tokens of a response that is split
    over several lines)."""
    from engine.sources.claude_code import read_claude_code

    sessions = report.get("sessions") or []
    theirs_prompt = sum(s.get("inputTokens", 0) + s.get("cacheCreationTokens", 0) + s.get("cacheReadTokens", 0)
                        for s in sessions)
    theirs_out = sum(s.get("outputTokens", 0) for s in sessions)
    ours = [read_claude_code(Path(e.path)) for e in entries]
    ours += [sub.session for s in ours for sub in s.subagents if sub.session is not None]
    ours_prompt = sum(c.prompt_tokens or 0 for s in ours for c in s.calls)
    ours_out = sum(c.completion_tokens or 0 for s in ours for c in s.calls)
    return [
        Figure("prompt tokens, all calls: ccusage total / ours", theirs_prompt / max(1, ours_prompt), "ratio",
               "1.000 (same figures)", abs(theirs_prompt - ours_prompt) == 0),
        Figure("output tokens, all calls: ccusage total / ours (largest seen)", theirs_out / max(1, ours_out), "ratio",
               "reported", None),
    ]


_READ_SCRIPT = """
import resource, sys, time
from pathlib import Path
from engine.sources.readers import read_source
from engine.sources.detect import detect_format
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
path = Path(sys.argv[1])
t0 = time.perf_counter()
src = read_source(path, detect_format(path))
took = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(took, (peak - base) * 1024, peak * 1024, len(src.calls), len(src.messages))
"""


def bench_large(tmp: Path, size_mb: int = 100) -> list[Figure]:
    figs = []
    for label, real in (("Claude Code", LARGEST), ("Codex", sorted(CODEX.glob("rollout-*.jsonl"))[0])):
        data = real.read_bytes()
        if not data.endswith(b"\n"):
            data += b"\n"
        big = tmp / f"big-{real.name}"
        with open(big, "wb") as fh:
            for _ in range(size_mb * MB // len(data) + 1):
                fh.write(data)
        size = big.stat().st_size
        _, out = _best_process([sys.executable, "-c", _READ_SCRIPT, str(big)], _tool_env(tmp / "home"), repeat=2,
                               cwd=REPO)
        secs, grown = (float(x) for x in out.split()[:2])
        figs.append(Figure(f"read a {size / MB:.0f} MB {label} session (its lines repeated)", secs, "s", "< 5 s",
                           secs < 5))
        figs.append(Figure("  peak memory of that read / file size", grown / size, "x", "< 3x", grown / size < 3))
        big.unlink()
    return figs


def bench_all() -> list[Figure]:
    if not SESSIONS.is_dir():
        return [Figure(f"no sessions at {SESSIONS}", float("nan"), "", "", False)]
    with tempfile.TemporaryDirectory(prefix="ctxbench-sources-") as name:
        tmp = Path(name)
        (tmp / "home").mkdir()
        figs = bench_import(tmp)
        figs += bench_claude_code_log(tmp, figs[1].value)
        figs += bench_sources(tmp)
        figs += bench_large(tmp)
        return figs


ALL: dict[str, Callable[[], list[Figure]]] = {"sources": bench_all}

if __name__ == "__main__":
    for fig in bench_all():
        print(fig.line(), flush=True)
