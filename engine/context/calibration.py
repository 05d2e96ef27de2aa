"""Calibration: estimates anchored on the provider's reported prompt tokens."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, overload


class IdSpan(Sequence[str]):
    """``base[start:end]`` of a list of message ids that is only ever appended to (:class:`RunningHistory`'s: a cut
    makes a new list), without copying it. Two spans of the same list from the same start hold the same ids over
    their common length: :func:`starts_with` knows it without comparing them (a request's ids against a call's
    before it, once per call, stay constant time however long the context grew)."""

    __slots__ = ("base", "end", "start")

    def __init__(self, base: list[str], start: int, end: int) -> None:
        self.base, self.start, self.end = base, start, end

    def __len__(self) -> int:
        return self.end - self.start

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        at = range(self.start, self.end)[index]
        if isinstance(at, range):
            return tuple(self.base[at.start:at.stop:at.step])
        return self.base[at]

    def __iter__(self) -> Iterator[str]:
        return islice(self.base, self.start, self.end)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IdSpan):
            return len(other) == len(self) and starts_with(self, other)
        return isinstance(other, tuple | list) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"IdSpan({list(self)!r})"


def kept(ids: Sequence[str]) -> Sequence[str]:
    """``ids`` as a calibrator keeps them: a span as it is (the list under it never changes), else a tuple."""
    return ids if isinstance(ids, IdSpan) else tuple(ids)


def starts_with(ids: Sequence[str], prefix: Sequence[str]) -> bool:
    """Whether ``ids`` begins with every id of ``prefix``: spans of one list from one start at once, else compared."""
    n = len(prefix)
    if n > len(ids):
        return False
    if isinstance(ids, IdSpan) and isinstance(prefix, IdSpan) and ids.base is prefix.base and ids.start == prefix.start:
        return True
    return n == 0 or (ids[n - 1] == prefix[n - 1] and tuple(ids[:n]) == tuple(prefix))


@dataclass
class Calibrator:
    """Anchors estimates on the provider's reported prompt tokens.

    After each call, :meth:`record` stores the raw estimate of the request and the provider's
    ``prompt_tokens``. The number for the next request is the reported count of the part already
    sent plus the raw estimate of what was added since, scaled by the ratio actual/estimate of the
    last call. When the request no longer starts with what was sent (compaction, edits), the whole
    raw estimate is scaled instead.

    This is the app's own agent's calibrator: the app builds every request itself, so the ratio is a
    property of the tokenizer against the estimator and is kept across its compactions and rewrites
    (persisted in ``session.json``). Other agents' files are calibrated by :class:`SourceCalibrator`.
    """

    last_raw: int | None = None
    last_actual: int | None = None
    last_prefix: Sequence[str] = ()  # a tuple, or an IdSpan (kept)
    last_fixed: tuple[int, int, int] = (0, 0, 0)  # system, summary, tools raw tokens at last call

    @property
    def ratio(self) -> float | None:
        if self.last_raw and self.last_actual:
            return self.last_actual / self.last_raw
        return None

    @property
    def calibrated(self) -> bool:
        return self.ratio is not None

    def record(
        self,
        raw_total: int,
        actual_prompt_tokens: int | None,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
    ) -> None:
        if actual_prompt_tokens is None or actual_prompt_tokens <= 0 or raw_total <= 0:
            return
        self.last_raw = raw_total
        self.last_actual = actual_prompt_tokens
        self.last_prefix = kept(message_ids)
        self.last_fixed = fixed

    def calibrate(
        self,
        raw_total: int,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
    ) -> int:
        """Calibrated prompt tokens for a request whose raw estimate is ``raw_total``."""
        return self.calibrate_known(raw_total, starts_with(message_ids, self.last_prefix), fixed)

    def calibrate_known(self, raw_total: int, same_ids: bool, fixed: tuple[int, int, int] = (0, 0, 0)) -> int:
        """:meth:`calibrate` when the caller already knows whether the request's messages start with
        those of the last call (``same_ids``): one multiplication."""
        ratio = self.ratio
        if ratio is None or self.last_raw is None or self.last_actual is None:
            return raw_total
        if same_ids and fixed == self.last_fixed and raw_total >= self.last_raw:
            return self.last_actual + round((raw_total - self.last_raw) * ratio)
        return round(raw_total * ratio)

    def to_json(self) -> dict[str, Any]:
        return {
            "last_raw": self.last_raw,
            "last_actual": self.last_actual,
            "last_prefix": list(self.last_prefix),
            "last_fixed": list(self.last_fixed),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Calibrator:
        if not data:
            return cls()
        fixed = data.get("last_fixed") or (0, 0, 0)
        return cls(
            last_raw=data.get("last_raw"),
            last_actual=data.get("last_actual"),
            last_prefix=tuple(data.get("last_prefix") or ()),
            last_fixed=(int(fixed[0]), int(fixed[1]), int(fixed[2])),
        )


# --------------------------------------------------------------------------- another agent's session

NEUTRAL_RATIO = 0.625  # chars × 2/5 against the ~chars/4 providers count (SPEC §1: it over-counts by ~45 %)
RESTART_RATIO = 0.8  # the scale of what follows the prefix in the first request after a compaction
RATIO_BOUNDS = (0.25, 1.5)  # a plausible actual/estimate for the heuristic (tool outputs cut before sending: low)
RECENT_STEPS = 5  # the increments the ratio is learnt over
MAX_ANCHORS = 16  # reported calls of the segment a later request can be anchored on (a rewind to one of them)


def _bounded(ratio: float) -> float:
    lo, hi = RATIO_BOUNDS
    return min(hi, max(lo, ratio))


@dataclass(frozen=True)
class Anchor:
    """A reported call of the current segment: its messages, fixed parts, raw estimate and provider figure."""

    ids: Sequence[str]  # a tuple, or an IdSpan
    fixed: tuple[int, int, int]
    raw: int
    actual: int

    def starts(self, ids: Sequence[str], fixed: tuple[int, int, int]) -> bool:
        """Whether a request with ``ids`` and ``fixed`` is this call's request with messages added after it."""
        return fixed == self.fixed and starts_with(ids, self.ids)


@dataclass
class SourceCalibrator(Calibrator):
    """The calibrator of another agent's session (an import, a followed file), one call at a time.

    The app's own :class:`Calibrator` keeps one ratio actual/estimate for the whole session: the app builds
    every request itself, so the ratio is a property of the tokenizer and stays right across its own
    compactions and rewrites. Another agent's file is not the request: Codex cuts long tool outputs before
    sending them (its rollout keeps them whole), Claude Code re-attaches files after a compaction that the
    file does not hold, publishers redact text to its length. A ratio learnt over one stretch of such a
    session does not carry to a context of another make-up (applied after a compaction, the ratio 0.49 of
    a Codex context full of cut tool outputs made the next call 41 % low; a ratio learnt over a prefix the
    file counts heuristically made another 23 × too high). So here:

    - a request that extends a reported call of the segment (the last, or an earlier one after a rewind)
      is that call's provider figure plus the raw estimate of what was added since, scaled by the ratio of
      the segment's last :data:`RECENT_STEPS` increments (Δ actual / Δ estimate), bounded to
      :data:`RATIO_BOUNDS`; before any increment was measured, by :data:`NEUTRAL_RATIO`;
    - any other request (the first after a compaction, an edited history, a new system prompt) starts
      again from what the provider reported: the prefix (system prompt + tool definitions) at its provider
      size — exact when it was inferred from the first call's figure, else scaled by what the first call
      showed — and the rest at :data:`RESTART_RATIO`, between the heuristic's typical over-count and its
      own count (measured on the shared sessions and the files the real agents write in the tests: 1.0 left
      a Codex agent's call 26 % high, 0.625 the shared Codex rollout's 32 % low, 0.8 both within 21 %);
    - :meth:`restart` (a compaction) forgets the segment's calls and increments;
    - a call whose figure is on another basis than the file (:meth:`record_unlike`: what the provider counted
      holds what the file does not — a request rebuilt on resuming, files re-attached after a compaction) is an
      anchor for the calls after it but teaches no increment; one whose extra is not sent again (a server-side
      search's results) is neither.
    """

    exact_prefix: int = 0  # the request's system prompt + tool definitions tokens, as the recorder counts them
    prefix_known: bool = False  # exact_prefix is the provider's own figure (inferred from its first call)
    prefix_scale: float | None = None  # provider size / raw estimate of the prefix; None before any report
    anchors: list[Anchor] = field(default_factory=list)
    steps: list[tuple[int, int]] = field(default_factory=list)  # (Δ raw, Δ actual) of the segment

    @property
    def ratio(self) -> float | None:
        """The scale of what is added to the last reported call (also the draft's)."""
        if self.prefix_scale is None:
            return None
        recent = self.steps[-RECENT_STEPS:]
        raw = sum(d for d, _ in recent)
        if raw <= 0:
            return NEUTRAL_RATIO
        return _bounded(sum(a for _, a in recent) / raw)

    @property
    def calibrated(self) -> bool:
        return self.prefix_scale is not None

    def restart(self) -> None:
        """A compaction: what was learnt of the segment before does not hold for the one after it."""
        self.anchors.clear()
        self.steps.clear()

    def record_unlike(
        self,
        raw_total: int,
        actual_prompt_tokens: int | None,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
        *,
        transient: bool = False,
    ) -> None:
        """A call whose provider figure counts what the file does not hold: kept as an anchor (the context the
        next request extends really is that size) unless ``transient`` (the extra is not sent again); either
        way no increment is learnt from it, and no prefix scale."""
        if transient or actual_prompt_tokens is None or actual_prompt_tokens <= 0 or raw_total <= 0:
            return
        if self.prefix_scale is None:  # the first call: the scale is learnt from it as from any call
            self.record(raw_total, actual_prompt_tokens, message_ids, fixed)
            return
        ids = kept(message_ids)
        self.anchors.append(Anchor(ids, fixed, raw_total, actual_prompt_tokens))
        del self.anchors[:-MAX_ANCHORS]
        Calibrator.record(self, raw_total, actual_prompt_tokens, ids, fixed)

    def _anchor(self, ids: Sequence[str], fixed: tuple[int, int, int]) -> Anchor | None:
        return next((a for a in reversed(self.anchors) if a.starts(ids, fixed)), None)

    def record(
        self,
        raw_total: int,
        actual_prompt_tokens: int | None,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
    ) -> None:
        if actual_prompt_tokens is None or actual_prompt_tokens <= 0 or raw_total <= 0:
            return
        ids = kept(message_ids)
        anchor = self._anchor(ids, fixed)
        if anchor is not None and raw_total > anchor.raw:
            self.steps.append((raw_total - anchor.raw, actual_prompt_tokens - anchor.actual))
            del self.steps[:-RECENT_STEPS]
        if self.prefix_scale is None:
            prefix = self.exact_prefix
            if self.prefix_known or prefix <= 0:
                self.prefix_scale = 1.0
            else:
                rest = NEUTRAL_RATIO * max(0, raw_total - prefix)
                self.prefix_scale = _bounded((actual_prompt_tokens - rest) / prefix)
        self.anchors.append(Anchor(ids, fixed, raw_total, actual_prompt_tokens))
        del self.anchors[:-MAX_ANCHORS]
        super().record(raw_total, actual_prompt_tokens, ids, fixed)

    def calibrate(
        self,
        raw_total: int,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
    ) -> int:
        return self._estimate(raw_total, self._anchor(message_ids, fixed))

    def calibrate_known(self, raw_total: int, same_ids: bool, fixed: tuple[int, int, int] = (0, 0, 0)) -> int:
        """:meth:`calibrate` when the caller knows whether the request extends the last reported call."""
        last = self.anchors[-1] if self.anchors else None
        return self._estimate(raw_total, last if same_ids and last is not None and last.fixed == fixed else None)

    def _estimate(self, raw_total: int, anchor: Anchor | None) -> int:
        scale, ratio = self.prefix_scale, self.ratio
        if scale is None or ratio is None:
            return raw_total
        prefix = round(self.exact_prefix * scale)
        if anchor is not None:
            return max(prefix, anchor.actual + round((raw_total - anchor.raw) * ratio))
        return prefix + round(max(0, raw_total - self.exact_prefix) * RESTART_RATIO)
