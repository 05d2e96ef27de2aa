"""app.collector: Python's cycles collected from the main thread's event loop only."""

from __future__ import annotations

import gc
import threading
from typing import Any

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
