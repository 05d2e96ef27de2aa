"""``python -m benchmarks`` (what ``make bench`` runs) exits non-zero when a target is missed."""

from __future__ import annotations

import pytest

from benchmarks import __main__ as bench_main
from benchmarks import engine_bench
from benchmarks.engine_bench import Figure


@pytest.mark.parametrize(("ok", "status"), [(True, 0), (None, 0), (False, 1)])
def test_exit_status_follows_the_targets(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         ok: bool | None, status: int) -> None:
    monkeypatch.setitem(engine_bench.ALL, "planted", lambda: [Figure("planted figure", 1.0, "ms", "< 1 ms", ok)])
    assert bench_main.main(["planted"]) == status
    out = capsys.readouterr().out
    assert "planted figure" in out and f"{int(ok is False)} target(s) missed" in out


def test_an_unknown_benchmark_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["no-such-benchmark"]) == 2
