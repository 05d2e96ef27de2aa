"""engine.store.staging: an import killed half-way (SIGKILL, in a real subprocess) leaves its hidden
``.import-<hex>`` folder; while the process lives nothing removes it, once it is gone the next import, the
sessions' listing and the views' clean-up do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from engine.context.conversation import SessionStore
from engine.ingest import import_source
from engine.store import staging
from engine.workbench import source_views as sv
from tests.conftest import REPO, SHARED

T = TypeVar("T")


def collections_during(work: Callable[[], T], young: int) -> tuple[T, list[int]]:
    """``work()`` run with automatic collection on and a collection due every ``young`` allocations, were the
    collector running: its result and the generations of the collections that started meanwhile (the collector's
    state as it was after)."""
    import gc

    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    was, threshold = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(young, 2, 2)
    gc.collect()
    gc.callbacks.append(count)
    try:
        result = work()
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
        (gc.enable if was else gc.disable)()
    return result, collections


SHORT = SHARED / "data" / "sessions" / "claude-code" / "short.jsonl"
SCRIPT = textwrap.dedent("""
    import sys, time
    import engine.ingest as ingest

    real = ingest._write

    def slow(*args, **kwargs):
        report = real(*args, **kwargs)
        print("written", flush=True)
        time.sleep(120)  # killed here: the session is built, not yet renamed into place
        return report

    ingest._write = slow
    ingest.import_source(sys.argv[1], session_dir=sys.argv[2])
""")


@pytest.fixture
def killed_import(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A subprocess importing ``short.jsonl`` into ``tmp_path/sessions``, stopped half-way (still alive)."""
    root = tmp_path / "sessions"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(SHORT), str(root / "20260101-000000-aaaaaa")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written", proc.stderr
        yield proc, root
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def leftovers(root: Path) -> list[Path]:
    return sorted(root.glob(".import-*"))


def age(folder: Path, seconds: float) -> None:
    """Make ``folder`` look ``seconds`` old (time passing, without waiting for it)."""
    then = time.time() - seconds
    os.utime(folder, (then, then))


def test_a_killed_import_leaves_a_folder_that_the_next_run_removes(
        killed_import: tuple[subprocess.Popen[str], Path], tmp_path: Path) -> None:
    proc, root = killed_import
    [left] = leftovers(root)
    assert (left / "session.json").is_file()
    age(left, 3600)
    # the importer is alive and holds it: kept, however old
    assert staging.remove_stale(root) == 0 and SessionStore(root).list() == [] and left.is_dir()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert leftovers(root) == [left]  # what a kill leaves
    report = import_source(SHORT, session_dir=root / "20260101-000001-bbbbbb")  # the next import clears it
    assert leftovers(root) == [] and report.path.is_dir()
    assert [s.id for s in SessionStore(root).list()] == ["20260101-000001-bbbbbb"]


def test_the_listing_of_sessions_removes_a_stale_one_and_spares_a_new_one(
        killed_import: tuple[subprocess.Popen[str], Path]) -> None:
    proc, root = killed_import
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    [left] = leftovers(root)
    assert SessionStore(root).list() == [] and leftovers(root) == [left]  # just made: its maker may not hold it yet
    age(left, staging.STALE_SECONDS + 1)
    assert SessionStore(root).list() == [] and leftovers(root) == []  # at start-up: gone


def test_the_views_clean_up_spares_an_import_in_progress(tmp_path: Path) -> None:
    root = tmp_path / "views"
    with staging.staging_folder(root) as building:
        age(building, 3600)
        stale = root / ".import-0123456789abcdef"
        stale.mkdir()
        age(stale, 3600)
        sv.remove_stale_views(root)
        assert building.is_dir() and not stale.exists()  # held by this process: kept; nobody's: removed
    assert not building.exists()  # not renamed into place: removed at the end


def test_the_collector_is_paused_while_an_import_builds_and_left_as_it_was() -> None:
    import gc

    from engine.store.staging import collection_paused

    was = gc.isenabled()
    try:
        gc.enable()
        with collection_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(KeyError), collection_paused():
            raise KeyError("x")
        assert gc.isenabled()
        gc.disable()  # a process that runs the collector itself (the window)
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_pauses_that_overlap_in_two_threads_resume_the_collector_when_the_last_ends() -> None:
    """An open's read in one worker and an import's in another: the collector stays paused until both are done (it
    was resumed when the first ended), and a process that runs it itself is told it is paused meanwhile."""
    import gc
    import threading

    from engine.store.staging import collection_is_paused, collection_paused

    was = gc.isenabled()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[bool, bool]] = []

    def first() -> None:
        with collection_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collection_paused():
            second_in.set()
            first_out.wait(5)
            seen.append((gc.isenabled(), collection_is_paused()))

    try:
        gc.enable()
        assert not collection_is_paused()
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert seen == [(False, True)]  # the first pause over, the second still running: still paused
        assert gc.isenabled() and not collection_is_paused()
    finally:
        (gc.enable if was else gc.disable)()
