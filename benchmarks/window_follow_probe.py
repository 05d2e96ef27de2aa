"""What a window-follow run spends and keeps: ``CTXBENCH_WINFOLLOW_PROBE=<folder>`` on
``python -m benchmarks.window_follow_bench child <MB> <seconds>`` (``CTXBENCH_WINFOLLOW_SAMPLE=0``: no sampling
profile, only the threads' CPU and the growth marks; ``CTXBENCH_WINFOLLOW_CPROFILE=1``: the main thread under
cProfile while following, in ``cprofile.txt``).

Written into the folder at the end of the run: ``threads.txt`` (CPU seconds of each thread while following, from
``/proc/self/task``), ``stacks.txt`` (a sampling profile: every :data:`PERIOD_S` the stacks of every thread, from
``sys._current_frames``, counted per thread, innermost function and whole stack) and ``growth.txt`` (objects
by type and the C heap's bytes in use, glibc's ``mallinfo2``, at each mark, and the types that grew the most).
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
from collections.abc import Callable
from pathlib import Path

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
        self.marks: list[tuple[str, float, tuple[float, float, float], collections.Counter[str]]] = []
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
        if self.sample:
            self._thread.start()
        return self

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(PERIOD_S):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
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
        self.marks.append((label, rss_mb, heap_in_use(), kinds))

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
        grow: list[str] = []
        for label, rss, heap, kinds in self.marks:
            grow.append(f"{label}: RSS {rss:.1f} MB, heap in use {heap[0]:.1f} MB, free in heap {heap[1]:.1f} MB, "
                        f"mmapped {heap[2]:.1f} MB, objects {sum(kinds.values())}")
        if len(self.marks) >= 2:
            first, last = self.marks[0][3], self.marks[-1][3]
            delta = {k: last[k] - first.get(k, 0) for k in last}
            grow += [f"  {d:+9d}  {k}" for k, d in sorted(delta.items(), key=lambda x: -x[1])[:40]]
        (self.folder / "growth.txt").write_text("\n".join(grow) + "\n")


def from_env() -> Probe:
    """The probe ``CTXBENCH_WINFOLLOW_PROBE`` asks for (unset: one that does nothing)."""
    folder = os.environ.get("CTXBENCH_WINFOLLOW_PROBE")
    sample = os.environ.get("CTXBENCH_WINFOLLOW_SAMPLE", "1") != "0"
    return Probe(Path(folder) if folder else None, sample)
