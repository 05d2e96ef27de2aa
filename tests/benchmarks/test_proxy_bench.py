"""The proxy benchmark (``python -m benchmarks proxy``) runs end to end on a small scale: three processes, every
figure produced, and the figures that are correctness (a stream passed whole, every exchange in the capture)
hold; the timings are the benchmark's to judge, not this test's (a loaded machine)."""

from __future__ import annotations

import pytest

from benchmarks import __main__ as bench_main
from benchmarks import proxy_bench


def test_the_proxy_benchmark_runs_small_and_loses_nothing() -> None:
    figures = {f.name: f for f in proxy_bench.run(events=40, rounds=4, mb=4, streams=5)}
    assert len(figures) == 10
    whole = figures["proxy: 4 MB answer passed whole (hash equal)"]
    assert whole.value == 1.0 and whole.ok
    assert figures["proxy: 5 concurrent streams, streams not passed whole"].value == 0
    assert figures["proxy: 5 concurrent streams, exchanges not in the capture"].value == 0
    growth = figures["proxy: 4 MB streamed answer, RSS growth over idle"]
    assert 0 <= growth.value < 50
    for name in ("proxy: added latency per streamed chunk, p95 (40 events)",
                 "proxy: time to first byte added, median of 4"):
        assert figures[name].unit == "ms" and figures[name].ok is not None


def test_the_proxy_benchmark_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["no-such"]) == 2
    assert "proxy" in capsys.readouterr().err.split("choose from", 1)[1].replace(",", " ").split()
