"""Run every benchmark and print each figure beside its target: ``python -m benchmarks [name ...]``.

The exit status is 1 when any figure misses its target (2 for an unknown benchmark name).
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main(argv: list[str]) -> int:
    from benchmarks import (
        accuracy,
        bigsession_bench,
        diff_bench,
        engine_bench,
        follow_bench,
        hostile,
        local_accuracy,
        longchain_bench,
        proxy_bench,
        source_view_bench,
        sources_bench,
        store_bench,
        summary_bench,
        usage_bench,
        window_follow_bench,
    )

    engine_bench.compiled(Path(__file__).resolve().parent.parent)  # (the processes timed load bytecode, as installed)
    suites = dict(engine_bench.ALL)
    suites.update(local_accuracy.ALL)
    suites.update(sources_bench.ALL)
    suites.update(summary_bench.ALL)
    suites.update(follow_bench.ALL)
    suites.update(store_bench.ALL)  # the timings moved out of the tests
    suites.update(diff_bench.ALL)
    suites.update(source_view_bench.ALL)
    suites.update(bigsession_bench.ALL)
    suites.update(usage_bench.ALL)  # issue 22: the usage index vs its targets and ccusage
    suites.update(hostile.ALL)  # issue 26: hostile input from the command line (crashes, hangs, silent loss)
    suites.update(proxy_bench.ALL)  # issue 31: the recording proxy (latency, memory, concurrent streams)
    suites.update(window_follow_bench.ALL)  # issue 28: following in the real window (offscreen)
    suites.update(longchain_bench.ALL)  # issue 28: import and open linear in calls; Gemini CLI's reader
    try:
        from benchmarks import gui_bench
    except ImportError:
        gui_bench = None
    if gui_bench is not None:
        from benchmarks import chat_find_bench

        suites.update(gui_bench.ALL)
        suites.update(chat_find_bench.ALL)
    chosen = [a for a in argv if not a.startswith("-")] or [*suites, "accuracy"]
    unknown = [c for c in chosen if c not in suites and c != "accuracy"]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join([*suites, 'accuracy'])}",
              file=sys.stderr)
        return 2
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {platform.system()} {platform.release()}")
    print(f"{'figure':58} {'value':>12} {'unit':8} {'target':26} result")
    missed = 0
    for name in chosen:
        if name == "accuracy":
            continue
        for fig in suites[name]():
            print(fig.line(), flush=True)
            missed += fig.ok is False
    if "accuracy" in chosen:
        print()
        accuracy.main([])
    print(f"\n{missed} target(s) missed")
    return 1 if missed else 0  # `make bench` fails when a target is missed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
