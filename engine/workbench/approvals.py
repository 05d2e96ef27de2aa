"""Tool approvals through futures: the tool awaits one, the user's answer resolves it.

No nested event loop, no modal dialog: :meth:`Approvals.ask` (the toolbox's ``approve``) emits an
:class:`ApprovalRequested` and awaits a future that :meth:`Approvals.answer` resolves;
:meth:`Approvals.withdraw` (Stop, the end of a turn) cancels every open one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

from engine.workbench.events import ApprovalRequested, ApprovalsWithdrawn, WorkbenchEvent


class Approvals:
    """The approval requests open now, by request id."""

    def __init__(self, emit: Callable[[WorkbenchEvent], None]) -> None:
        self._emit = emit
        self._pending: dict[str, asyncio.Future[bool]] = {}

    async def ask(self, name: str, arguments: dict[str, Any]) -> bool:
        rid = uuid.uuid4().hex
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._emit(ApprovalRequested(rid, name, json.dumps(arguments, ensure_ascii=False)))
        try:
            return await fut
        finally:
            self._pending.pop(rid, None)

    def answer(self, request_id: str, allowed: bool) -> None:
        """Resolve a request (a late or unknown id changes nothing)."""
        fut = self._pending.get(request_id)
        if fut is not None and not fut.done():
            fut.set_result(bool(allowed))

    def pending(self) -> list[str]:
        return list(self._pending)

    def withdraw(self) -> None:
        """Cancel every open request (the tools that asked see a refusal)."""
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.cancel()
        self._emit(ApprovalsWithdrawn())


__all__ = ["Approvals"]
