"""app.collector: Python's cycles collected from the main thread's event loop only."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from app.collector import MainThreadCollector


class _Cycle:
    def __init__(self, log: list[str]) -> None:
        self.me = self
        self.log = log

    def __del__(self) -> None:
        self.log.append(threading.current_thread().name)


def test_cycles_are_collected_on_the_main_thread_never_in_a_worker(qtbot: Any, main_thread_gc: Any) -> None:
    assert not gc.isenabled()  # the session's collector switched automatic collection off
    log: list[str] = []
    for _ in range(50):
        _Cycle(log)

    kept: list[Any] = []

    def churn() -> None:  # a worker allocating (and keeping) far past the thresholds: it must not collect
        kept.append([[{} for _ in range(20)] for _ in range(5 * gc.get_threshold()[0])])

    worker = threading.Thread(target=churn, name="churn")
    worker.start()
    worker.join()
    assert log == [], "nothing collected off the event loop"
    assert main_thread_gc.due() >= 0  # a collection is due: the next tick of the timer runs it
    before = main_thread_gc.collections
    qtbot.waitUntil(lambda: len(log) == 50, timeout=5_000)  # the timer collects
    assert set(log) == {threading.main_thread().name} and main_thread_gc.collections > before


def test_the_heaps_free_pages_are_handed_back_every_trim_interval(qtbot: Any, main_thread_gc: Any) -> None:
    """While a followed session grows, the C heap's free memory is handed back on the collector's timer (glibc's
    malloc_trim), every TRIM_INTERVAL_S; not before."""
    import app.collector as collector

    assert collector.TRIM_INTERVAL_S >= 10  # not on every tick: a trim gives pages back that the next reads fault in
    calls: list[float] = []
    real = collector.trim

    def counted() -> bool:
        calls.append(1.0)
        return real()

    collector.trim = counted  # type: ignore[assignment]
    try:
        mine = MainThreadCollector(trim_interval_s=0.2)
        mine.collect()
        assert calls == []  # not yet: the interval starts when the collector does
        blocks = [bytearray(700) for _ in range(20_000)]  # ~14 MB in small blocks of the C heap, then freed
        del blocks
        qtbot.waitUntil(lambda: len(calls) >= 2, timeout=5_000)
        assert mine.trims >= 1  # the freed blocks' pages were handed back
        mine.stop()
    finally:
        collector.trim = real  # type: ignore[assignment]


def test_stop_gives_the_automatic_collection_back(qapp: Any) -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        collector = MainThreadCollector(qapp)
        assert not gc.isenabled()
        collector.stop()
        assert gc.isenabled()
    finally:
        if not was:
            gc.disable()


def test_no_collection_is_due_while_a_bulk_read_pauses_the_collector(qapp: Any) -> None:
    """An import's or an open's read in a worker (engine.store.staging.collection_paused): the timer does not walk the
    objects it is making; once it is over, the collection that was due runs."""
    from engine.store.staging import collection_paused

    was = gc.isenabled()
    collector = MainThreadCollector(qapp, interval_ms=3_600_000)  # its timer never fires here: asked directly
    try:
        kept = [[{} for _ in range(20)] for _ in range(2 * gc.get_threshold()[0])]
        assert collector.due() >= 0
        with collection_paused():
            assert collector.due() == -1 and collector.collect() == 0 and collector.collections == 0
        assert collector.due() >= 0 and kept
        collector.collect()
        assert collector.collections == 1
    finally:
        collector.stop()
        if was:
            gc.enable()


def test_give_back_collects_cycles_and_returns_free_memory() -> None:
    """give_back (called after a whole session was replaced) collects every generation, even with automatic
    collection off, and hands the C heap's free pages back (glibc's malloc_trim)."""
    import gc
    import weakref

    from app.collector import give_back

    class Node:
        pass

    was = gc.isenabled()
    gc.disable()
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        gone = weakref.ref(a)
        blob = [bytearray(1 << 20) for _ in range(64)]  # 64 MB freed below: something to hand back
        del a, b, blob
        assert gone() is not None  # a cycle: not freed without a collection
        trimmed = give_back()
        assert gone() is None
        assert isinstance(trimmed, bool)
    finally:
        if was:
            gc.enable()


def test_reclaimer_hands_memory_back_once_loads_settle(qtbot) -> None:
    """A first screen then its whole view: one run, after the last; the whole collection only when what was
    replaced was large (else the trim alone)."""
    from app.collector import LARGE_ROWS, Reclaimer

    rec = Reclaimer(delay_ms=50)
    rec.replaced(0)  # the empty session shown at start
    rec.replaced(90)  # the first screen of a large file
    assert rec.pending() and rec.runs == []
    qtbot.waitUntil(lambda: not rec.pending(), timeout=2000)
    assert rec.runs == ["trim"]
    rec.replaced(LARGE_ROWS - 1)
    rec.replaced(1)
    qtbot.waitUntil(lambda: not rec.pending(), timeout=2000)
    assert rec.runs == ["trim", "give_back"]


def test_a_whole_collection_waits_for_a_quarter_more_long_lived_objects(qapp: Any) -> None:
    """As the interpreter decides: past the oldest generation's threshold, a whole collection is due only once the
    objects moved up since the last one are a quarter of those it left (not every ten younger collections)."""
    was = gc.isenabled()
    collector = MainThreadCollector(qapp, interval_ms=3_600_000)  # its timer never fires here: due() asked directly
    try:
        gc.collect()
        for _ in range(gc.get_threshold()[2] + 1):
            gc.collect(1)  # the oldest generation's count past its threshold, few objects moved up
        assert gc.get_count()[2] > gc.get_threshold()[2]
        assert collector.due() != 2
        kept = [[i] for i in range(len(gc.get_objects(2)) // 3 + 1)]  # a third more objects, moved up by a younger
        gc.collect(1)  # collection
        assert collector.due() == 2
        collector.collect()
        assert collector.due() != 2 and kept
    finally:
        collector.stop()
        if was:
            gc.enable()


_ARENAS_CHILD = """
import re, threading
from PySide6.QtCore import QCoreApplication
from app.collector import MainThreadCollector, heaps_report
app = QCoreApplication([])
collector = MainThreadCollector(app)
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    held = [bytearray(20_000) for _ in range(50)]  # glibc's (not Python's small-object) memory, in each thread
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(re.findall('<heap nr=', heaps_report())))
collector.stop()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heaps")
def test_threads_share_at_most_two_heaps(tmp_path: Any) -> None:
    """Eight threads allocating at once share the glibc heaps the collector allows (each would get its own, each
    keeping its own free memory)."""
    from app.collector import ARENAS

    out = subprocess.run([sys.executable, "-c", _ARENAS_CHILD], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert out.returncode == 0, out.stderr
    assert ARENAS == 2 and int(out.stdout.split()[-1]) <= ARENAS
