"""Calibration: estimates anchored on the provider's reported prompt tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Calibrator:
    """Anchors estimates on the provider's reported prompt tokens.

    After each call, :meth:`record` stores the raw estimate of the request and the provider's
    ``prompt_tokens``. The number for the next request is the reported count of the part already
    sent plus the raw estimate of what was added since, scaled by the ratio actual/estimate of the
    last call. When the request no longer starts with what was sent (compaction, edits), the whole
    raw estimate is scaled instead.
    """

    last_raw: int | None = None
    last_actual: int | None = None
    last_prefix: tuple[str, ...] = ()
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
        self.last_prefix = tuple(message_ids)
        self.last_fixed = fixed

    def calibrate(
        self,
        raw_total: int,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
    ) -> int:
        """Calibrated prompt tokens for a request whose raw estimate is ``raw_total``."""
        n = len(self.last_prefix)
        same_ids = n <= len(message_ids) and tuple(message_ids[:n]) == self.last_prefix
        return self.calibrate_known(raw_total, same_ids, fixed)

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
