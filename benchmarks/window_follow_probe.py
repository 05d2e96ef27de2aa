"""What a window-follow run spends and keeps: ``CTXBENCH_WINFOLLOW_PROBE=<folder>`` on
``python -m benchmarks.window_follow_bench child <MB> <seconds>`` (``CTXBENCH_WINFOLLOW_SAMPLE=0``: no sampling
profile, only the threads' CPU and the growth marks; ``CTXBENCH_WINFOLLOW_CPROFILE=1``: the main thread under
cProfile while following, in ``cprofile.txt``; ``CTXBENCH_WINFOLLOW_TRACE=1``: Python's allocations traced from the
start of the follow, ``tracemalloc.txt`` the sites that hold the most of what was allocated since and is still held
at the end, by traceback, and the growth between the first and the last mark; ``CTXBENCH_WINFOLLOW_TOP``: how many
lines it lists, 40 unless set).

Written into the folder at the end of the run: ``threads.txt`` (CPU seconds of each thread while following, from
``/proc/self/task``), ``stacks.txt`` (a sampling profile: every :data:`PERIOD_S` the stacks of every thread, from
``sys._current_frames``, counted per thread, innermost function and whole stack) and ``growth.txt`` (objects
by type, the C heap's bytes in use, glibc's ``mallinfo2``, and ``/proc/self/smaps_rollup``'s anonymous and file-backed
resident sizes at each mark, and the types that grew the most).
The sampler holds the GIL for a few microseconds per sample: a cost of about 1 % of a core, not in the figures
of runs without the probe.
"""

from __future__ import annotations

import collections
import cProfile
import ctypes
import ctypes.util
import gc
import os
import pstats
import sys
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

PERIOD_S = 0.005


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_in_use() -> tuple[float, float, float]:
    """glibc's heap: MB in use by allocations, MB free inside it, MB mapped for large blocks."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return (float("nan"),) * 3
    return info.uordblks / 2**20, info.fordblks / 2**20, info.hblkhd / 2**20


def resident() -> str:
    """Resident MB by kind of mapping (``/proc/self/smaps``): glibc's main heap, the anonymous ones (Python's object
    arenas, glibc's threads' heaps, large blocks), files."""
    kinds = collections.Counter[str]()
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return "smaps n/a"
    kind = "file"
    for line in text.splitlines():
        head = line.split(None, 6)
        if "-" in head[0] and not head[0].endswith(":"):
            name = head[5] if len(head) > 5 else ""
            kind = "heap" if name == "[heap]" else "anon" if not name or name.startswith("[anon") else "file"
        elif head[0] == "Rss:":
            kinds[kind] += int(head[1])
    return ", ".join(f"{k} {kinds[k] / 1024:.1f}" for k in ("heap", "anon", "file"))


def _arenas() -> str:
    """glibc's arenas (``malloc_info``: the main one and the threads'): MB each holds from the system, MB free."""
    import re

    from app.collector import heaps_report

    xml = heaps_report()
    if xml is None:
        return "malloc_info n/a"
    out = []
    for heap in re.findall(r'<heap nr="\d+">(.*?)</heap>', xml, re.S):
        current = re.search(r'<system type="current" size="(\d+)"', heap)
        free = sum(int(v) for v in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', heap))
        out.append(f"{int(current.group(1)) / 2**20 if current else 0:.0f}/{free / 2**20:.0f}")
    return f"glibc arenas (MB held/free) {' '.join(out)}"


def _pymalloc() -> str:
    """Python's small-object allocator (``sys._debugmallocstats``): arenas, MB in blocks in use and free."""
    import tempfile
    with tempfile.TemporaryFile("w+") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    got = {}
    for line in text.splitlines():
        for key in ("# arenas allocated current", "# bytes in allocated blocks", "# bytes in available blocks",
                    "# bytes in unused pools"):
            if line.startswith(key):
                got[key] = int(line.split("=")[-1].replace(",", "").strip())
    return (f"pymalloc arenas {got.get('# arenas allocated current', 0)}, in use "
            f"{got.get('# bytes in allocated blocks', 0) / 2**20:.1f} MB, free blocks "
            f"{got.get('# bytes in available blocks', 0) / 2**20:.1f} MB, unused pools "
            f"{got.get('# bytes in unused pools', 0) / 2**20:.1f} MB")


def _vm_rss() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _frames(frame: Any) -> list[str]:
    parts: list[str] = []
    while frame is not None and len(parts) < 40:
        parts.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return parts


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread, by ``name:tid``."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[f"{comm}:{task.name}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


class Probe:
    """The sampler thread and the marks; :meth:`finish` writes the files."""

    def __init__(self, folder: Path | None, sample: bool = True) -> None:
        self.enabled = folder is not None  # None: every method does nothing (a run without the probe)
        self.folder = folder or Path()
        self.sample = sample
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        self.leaf: collections.Counter[tuple[str, str]] = collections.Counter()
        self.stack: collections.Counter[tuple[str, str]] = collections.Counter()
        self.samples: collections.Counter[str] = collections.Counter()
        self.marks: list[tuple[str, float, tuple[float, float, float], collections.Counter[str], str]] = []
        self.trace = folder is not None and os.environ.get("CTXBENCH_WINFOLLOW_TRACE") == "1"
        self.snapshots: list[tracemalloc.Snapshot] = []
        self.jumps: list[str] = []  # RSS jumps seen by the sampler, with the stacks
        self._stop = threading.Event()
        self._cpu0: dict[str, float] = {}
        self.profile: cProfile.Profile | None = None
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)

    def start(self) -> Probe:
        """Following starts: the threads' CPU noted, the sampler (and cProfile) on; the probe itself."""
        if not self.enabled:
            return self
        if os.environ.get("CTXBENCH_WINFOLLOW_CPROFILE") == "1":  # the main thread's calls, C time inside included
            self.profile = cProfile.Profile()
            self.profile.enable()
        self._cpu0 = thread_cpu()
        if self.trace:
            tracemalloc.start(12)
        if self.sample:
            self._thread.start()
        return self

    def _run(self) -> None:
        me = threading.get_ident()
        rss, ticks = _vm_rss(), 0
        while not self._stop.wait(PERIOD_S):
            names = {t.ident: t.name for t in threading.enumerate()}
            frames = sys._current_frames()
            ticks += 1
            if ticks % 10 == 0:  # RSS every 50 ms: a jump of 8 MB or more, with every thread's stack then
                now = _vm_rss()
                if now - rss >= 8.0:
                    self.jumps.append(f"+{now - rss:.1f} MB → {now:.1f} MB\n" + "\n".join(
                        f"  {names.get(i, i)}: " + " < ".join(_frames(f)[:16]) for i, f in frames.items() if i != me))
                rss = now
            for ident, frame in frames.items():
                if ident == me:
                    continue
                name = names.get(ident, str(ident))
                parts: list[str] = []
                f = frame
                while f is not None and len(parts) < 40:
                    code = f.f_code
                    parts.append(f"{Path(code.co_filename).name}:{code.co_name}:{f.f_lineno}")
                    f = f.f_back
                self.samples[name] += 1
                self.leaf[(name, parts[0] if parts else "?")] += 1
                self.stack[(name, " < ".join(parts[:14]))] += 1

    def tick(self, elapsed: float, rss_mb: Callable[[], float]) -> None:
        """A mark after the first 5 s of following, then every 100 s."""
        if self.enabled and elapsed >= (5.0 if not self.marks else len(self.marks) * 100.0):
            self.mark(f"{elapsed:.0f} s", rss_mb())

    def mark(self, label: str, rss_mb: float) -> None:
        gc.collect()
        kinds: collections.Counter[str] = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        if self.trace:
            self.snapshots.append(tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)]))
        self.marks.append((label, rss_mb, heap_in_use(), kinds, f"{resident()}; {_pymalloc()}; {_arenas()}"))

    def finish(self, rss_mb: float) -> None:
        """The last mark, and the files written."""
        if not self.enabled:
            return
        self.mark("end", rss_mb)
        if self.profile is not None:
            self.profile.disable()
            with open(self.folder / "cprofile.txt", "w") as fh:
                pstats.Stats(self.profile, stream=fh).sort_stats("cumulative").print_stats(90)
                pstats.Stats(self.profile, stream=fh).sort_stats("tottime").print_stats(60)
        self._stop.set()
        if self.sample:
            self._thread.join()
        cpu1 = thread_cpu()
        lines = [f"{cpu1[k] - self._cpu0.get(k, 0.0):8.2f} s  {k}" for k in cpu1]
        (self.folder / "threads.txt").write_text("\n".join(sorted(lines, reverse=True)) + "\n")
        out: list[str] = []
        for name, total in self.samples.most_common():
            out.append(f"== {name}: {total} samples")
            leaves = [(k[1], v) for k, v in self.leaf.items() if k[0] == name]
            out += [f"  {v:6d}  {leaf}" for leaf, v in sorted(leaves, key=lambda x: -x[1])[:25]]
            stacks = [(k[1], v) for k, v in self.stack.items() if k[0] == name]
            out += [f"  {v:6d}  {s}" for s, v in sorted(stacks, key=lambda x: -x[1])[:25]]
        (self.folder / "stacks.txt").write_text("\n".join(out) + "\n")
        (self.folder / "jumps.txt").write_text("\n".join(self.jumps) + "\n")
        grow: list[str] = []
        for label, rss, heap, kinds, smaps in self.marks:
            grow.append(f"{label}: RSS {rss:.1f} MB ({smaps}), heap in use {heap[0]:.1f} MB, free in heap "
                        f"{heap[1]:.1f} MB, mmapped {heap[2]:.1f} MB, objects {sum(kinds.values())}")
        if len(self.marks) >= 2:
            first, last = self.marks[0][3], self.marks[-1][3]
            delta = {k: last[k] - first.get(k, 0) for k in last}
            grow += [f"  {d:+9d}  {k}" for k, d in sorted(delta.items(), key=lambda x: -x[1])[:40]]
        (self.folder / "growth.txt").write_text("\n".join(grow) + "\n")
        if len(self.snapshots) >= 2:
            self._write_traces()

    def _write_traces(self) -> None:
        """What the follow allocated and still holds: by line, then by whole traceback; first mark → last, and the
        last two marks (the steady part, once the caches are full)."""
        out: list[str] = []
        pairs = [("first mark", self.snapshots[0]), ("the mark before the end", self.snapshots[-2])]
        last = self.snapshots[-1]
        for name, first in pairs if len(self.snapshots) > 2 else pairs[:1]:
            total = sum(s.size_diff for s in last.compare_to(first, "filename"))
            out.append(f"##### growth from the {name} to the end: {total / 2**20:+.2f} MB traced")
            by_file = last.compare_to(first, "filename")[:25]
            out += [f"{s.size_diff / 2**10:+10.1f} KiB {s.count_diff:+8d} blocks  {s.traceback[0].filename}"
                    for s in by_file]
            for key in ("lineno", "traceback"):
                out.append(f"== by {key}")
                top = int(os.environ.get("CTXBENCH_WINFOLLOW_TOP", "40")) if key == "lineno" else 15
                for stat in last.compare_to(first, key)[:top]:
                    out.append(f"{stat.size_diff / 2**10:+10.1f} KiB {stat.count_diff:+8d} blocks")
                    out += [f"      {line}" for line in stat.traceback.format(limit=12 if key == "traceback" else 1)]
        (self.folder / "tracemalloc.txt").write_text("\n".join(out) + "\n")
        tracemalloc.stop()


def from_env() -> Probe:
    """The probe ``CTXBENCH_WINFOLLOW_PROBE`` asks for (unset: one that does nothing)."""
    folder = os.environ.get("CTXBENCH_WINFOLLOW_PROBE")
    sample = os.environ.get("CTXBENCH_WINFOLLOW_SAMPLE", "1") != "0"
    return Probe(Path(folder) if folder else None, sample)
