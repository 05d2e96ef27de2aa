"""A session with its in-memory context state: token counts, calibration and the snapshot of the
next request. The files are :class:`engine.store.session.StoredSession`'s; this adds what needs token
counting (the per-message ledger kept in step with every edit of the history, the calibrator saved
in session.json) and the operations that need the context's rules (restoring archived messages at a
clean cut).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.context.calibration import Calibrator
from engine.context.snapshots import snapshot_of
from engine.context.tokens import Estimator, HeuristicEstimator, TokenCache, TokenLedger
from engine.context.turns import clean_cut_points
from engine.model.messages import Message, message_date
from engine.model.snapshot import ContextSnapshot, WindowInfo
from engine.store import archive
from engine.store.config import Settings
from engine.store.session import StoredSession
from engine.store.sessions import SessionIndex


class Session(StoredSession):
    """One conversation folder and the token state of its history."""

    def __init__(
        self, path: Path, meta: dict[str, Any], messages: list[Message], estimator: Estimator | None = None
    ) -> None:
        self.estimator: Estimator = estimator or HeuristicEstimator()
        self.ledger = TokenLedger(TokenCache(self.estimator), messages)
        self.calibrator = Calibrator.from_json(meta.get("calibrator"))
        super().__init__(path, meta, messages)

    def set_estimator(self, estimator: Estimator) -> None:
        """Count with another estimator from now on (the ledger is rebuilt)."""
        self.estimator = estimator
        self.ledger = TokenLedger(TokenCache(estimator), self.messages)

    def _before_save(self) -> None:
        self.meta["calibrator"] = self.calibrator.to_json()

    def _on_append(self, batch: Sequence[Message]) -> None:
        for m in batch:
            self.ledger.append(m)

    def _on_replace(self, changes: Sequence[tuple[int, Message]]) -> None:
        for i, m in changes:
            self.ledger.replace(i, m)

    def _on_reset(self) -> None:
        self.ledger.reset(self.messages)

    def restore_from_archive(self, ids: Iterable[str]) -> list[Message]:
        """Bring archived messages back into the history (with their tool-call partners).

        They go where they belong in time: before the first live message that is not older, moved
        earlier to the nearest clean cut so no call is separated from its result. Messages already
        live are skipped. Returns the messages restored.
        """
        self._check_open()
        chosen = archive.restore_selection(self.path, ids)
        restored = [dict(m) for m in chosen if str(m.get("id")) not in self._index]
        if not restored:
            return []
        first = _ts_key(restored[0])
        pos = len(self.messages)
        for i, m in enumerate(self.messages):
            if _ts_key(m) >= first:
                pos = i
                break
        ok = clean_cut_points(self.messages)
        while pos > 0 and not ok[pos]:
            pos -= 1
        new = self.messages[:pos] + restored + self.messages[pos:]
        self.rewrite(new)
        return restored

    def token_counts(self, estimator: Estimator | None = None, messages: Sequence[Message] | None = None) -> list[int]:
        """Per-message tokens of the live history (or of ``messages``); the ledger's when it can."""
        return self._counts_for(estimator or self.estimator, messages)

    def counts_with(self, estimator: Estimator) -> bool:
        """Do the ledger's counts hold what ``estimator`` would count (so its running total can be used)?"""
        return estimator is self.estimator or (estimator.name == "heuristic" and self.estimator.name == "heuristic")

    def _counts_for(self, estimator: Estimator, messages: Sequence[Message] | None) -> list[int]:
        same = self.counts_with(estimator)
        if messages is None and same:
            return list(self.ledger.counts)
        cache = self.ledger.cache if same else TokenCache(estimator)
        return [cache.count(m) for m in (self.messages if messages is None else messages)]

    def snapshot(
        self,
        settings: Settings,
        estimator: Estimator | None = None,
        system_prompt: str | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        draft: str = "",
        *,
        window: WindowInfo | int | None = None,
        messages: Sequence[Message] | None = None,
        summary: str | None = None,
        provider_prompt_tokens: int | None = None,
        call_index: int | None = None,
        calibrated: bool = True,
        model: str | None = None,
        prefix_tokens: int | tuple[int, int] | None = None,
    ) -> ContextSnapshot:
        """The regions of the next request (or of ``messages``/``summary`` instead of the live ones).

        ``model`` labels the snapshot (default: the settings' model). ``prefix_tokens``: the system
        prompt and tool definitions as one count inferred from a provider's figure (another agent's,
        which its session file does not hold): the system region, instead of estimating
        ``system_prompt`` and ``tools``; a pair: (system, tools) as another agent's file holds them."""
        return snapshot_of(
            self, settings, estimator, system_prompt, tools, draft, window=window, messages=messages,
            summary=summary, provider_prompt_tokens=provider_prompt_tokens, call_index=call_index,
            calibrated=calibrated, model=model, prefix_tokens=prefix_tokens,
        )


def _ts_key(msg: Message) -> datetime:
    ts = msg.get("ts")
    if isinstance(ts, str):
        try:
            parsed = datetime.fromisoformat(ts)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except ValueError:
            pass
    d = message_date(msg)
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


class SessionStore(SessionIndex[Session]):
    """The sessions under one root folder (default ``data_dir()/sessions``)."""

    session_class = Session
