"""Row heights with O(log n) prefix sums (a Fenwick tree): :class:`HeightIndex`."""

from __future__ import annotations

from array import array
from collections.abc import Iterable


class HeightIndex:
    """Row heights with O(log n) prefix sums, point updates, appends and offset → row search (Fenwick). The heights
    and the tree's sums are machine integers (``array``: 8 bytes a row each, not an int object and its slot: a
    followed session's chat gains rows for as long as it grows)."""

    def __init__(self, heights: Iterable[int] = ()) -> None:
        self.reset(heights)

    def reset(self, heights: Iterable[int]) -> None:
        self.a = array("q", [max(1, int(h)) for h in heights])
        n = len(self.a)
        t = array("q", bytes(8 * (n + 1)))
        for i in range(1, n + 1):
            t[i] += self.a[i - 1]
            j = i + (i & -i)
            if j <= n:
                t[j] += t[i]
        self.t = t

    def __len__(self) -> int:
        return len(self.a)

    def prefix(self, i: int) -> int:
        """Sum of the first ``i`` heights (the top of row ``i``)."""
        s = 0
        t = self.t
        while i > 0:
            s += t[i]
            i -= i & -i
        return s

    def total(self) -> int:
        return self.prefix(len(self.a))

    def set(self, row: int, height: int) -> int:
        """Set a row's height; returns the change."""
        height = max(1, int(height))
        d = height - self.a[row]
        if d:
            self.a[row] = height
            i = row + 1
            n = len(self.a)
            t = self.t
            while i <= n:
                t[i] += d
                i += i & -i
        return d

    def append(self, height: int) -> None:
        height = max(1, int(height))
        self.a.append(height)
        i = len(self.a)
        self.t.append(height + self.prefix(i - 1) - self.prefix(i - (i & -i)))

    def remove(self, first: int, last: int) -> None:
        """Take rows ``first``..``last`` out: the sums of the rows before ``first`` stand as they are (a node holds
        only rows at or before its own), those after are made again one by one — O((n - first) log n), a few rows
        when they go from the end (a followed session's last message taken back); the whole index made again when
        most of it would be."""
        del self.a[first:last + 1]
        n = len(self.a)
        if (n - first) * 8 > n:
            self.reset(self.a)
            return
        t = self.t
        del t[first + 1:]
        for i in range(first + 1, n + 1):
            t.append(self.a[i - 1] + self.prefix(i - 1) - self.prefix(i - (i & -i)))

    def find(self, y: int) -> int:
        """The row that contains offset ``y`` (clamped to the rows that exist)."""
        n = len(self.a)
        if n == 0:
            return 0
        pos = 0
        rem = y
        step = 1 << n.bit_length()
        t = self.t
        while step:
            nxt = pos + step
            if nxt <= n and t[nxt] <= rem:
                pos = nxt
                rem -= t[nxt]
            step >>= 1
        return min(pos, n - 1)
