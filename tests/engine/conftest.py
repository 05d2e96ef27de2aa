"""Engine-test helpers: a tally of the fuzz / fault cases that ran, printed at the end of the run.

Tests that generate cases (hypothesis examples, fault scenarios) record them with the ``cases``
fixture::

    def test_x(cases: CaseTally) -> None:
        cases.add("session files")          # one case
        cases.add("provider responses", 5)  # five at once

and the terminal summary gets one line per family plus the total, e.g.::

    ==================== robustness cases ====================
    session files: 412
    ...
    total: 1873 cases

The generated examples are derandomized (hypothesis profile ``repeatable``: the same examples, so
the same tally, on every run of the same code). ``HYPOTHESIS_PROFILE=explore`` draws fresh random
examples instead; the tally's heading then says that its counts vary from run to run.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import settings

# the examples are a function of the test's code (no database: a saved failure would add examples)
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

_TALLY_KEY = pytest.StashKey["CaseTally"]()


class CaseTally:
    """Counts of generated cases, by family (a short human label)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, family: str, n: int = 1) -> None:
        self.counts[family] += n

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        out = [f"{family}: {n}" for family, n in sorted(self.counts.items())]
        out.append(f"total: {self.total} cases")
        return out


def _tally(config: pytest.Config) -> CaseTally:
    tally = config.stash.get(_TALLY_KEY, None)
    if tally is None:
        tally = CaseTally()
        config.stash[_TALLY_KEY] = tally
    return tally


@pytest.fixture(scope="session")
def cases(request: pytest.FixtureRequest) -> CaseTally:
    """The session-wide tally of generated cases (see the module docstring)."""
    return _tally(request.config)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    tally = config.stash.get(_TALLY_KEY, None)
    if tally is None or not tally.counts:
        return
    if settings.default.derandomize:
        terminalreporter.write_sep("=", "robustness cases (derandomized: the same on every run)")
    else:
        terminalreporter.write_sep("=", "robustness cases (random examples: the counts vary from run to run)")
    for line in tally.lines():
        terminalreporter.write_line(line)
