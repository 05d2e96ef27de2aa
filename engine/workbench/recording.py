"""The recording proxy run for the window (File → Record an agent…): on a thread of its own with its own asyncio
loop, so that forwarding and recording never wait on the UI thread (nor the UI on them).

:class:`ProxyService` ``start(port, upstream)`` blocks until the proxy listens (or says why it cannot) and answers a
:class:`ProxyStarted` — the address, the capture file and :func:`engine.capture.agents.setup_lines`, what to set for
an agent to go through it; each finished exchange is told to ``on_exchange`` as an
:func:`engine.capture.agents.exchange_summary` with its ``prompt`` and ``completion`` tokens and ``call``
(:func:`is_call`: whether the capture's reader counts it as a provider call), from the proxy's thread (a listener
hands it to its own); ``stop()`` closes the proxy (the exchanges in flight end with it) and the capture, and
answers a :class:`ProxyStopped`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capture.agents import exchange_summary, setup_lines
from engine.capture.files import MAX_BYTES, CaptureWriter
from engine.capture.proxy import ProxyError, RecordingProxy, Upstreams
from engine.sources.capture import GENERATION, call_usage

START_TIMEOUT = 10.0  # seconds start() waits for the proxy to listen
STOP_TIMEOUT = 10.0


def is_call(row: dict[str, Any]) -> bool:
    """Whether an exchange (:func:`exchange_summary`) is read as a provider call of the capture
    (:class:`engine.sources.capture.CaptureReader`): a model request answered whole with a 2xx status."""
    path = str(row.get("path") or "")
    status = row.get("status")
    return (row.get("family") in GENERATION and row.get("outcome") == "complete" and isinstance(status, int)
            and 200 <= status < 300 and "count_tokens" not in path and ":countTokens" not in path)


@dataclass(frozen=True)
class ProxyStarted:
    url: str
    capture: Path
    setup: list[str]
    upstreams: dict[str, str]


@dataclass(frozen=True)
class ProxyStopped:
    exchanges: int
    capture: Path
    parts: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class ProxyService:
    """One recording proxy on a thread of its own (see the module docstring). ``on_exchange`` is called from that
    thread; its failure never stops the proxy."""

    def __init__(self, on_exchange: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.on_exchange = on_exchange
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._proxy: RecordingProxy | None = None
        self._writer: CaptureWriter | None = None
        self._ready = threading.Event()
        self._error = ""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, port: int = 0, upstream: str | None = None, *, capture: Path | None = None,
              max_bytes: int = MAX_BYTES, agent: str = "") -> ProxyStarted:
        """Listen on 127.0.0.1:``port`` (0: a free one), forwarding to ``upstream`` (all APIs) or each provider's
        real address; ProxyError saying why when it cannot (the port taken, the capture not writable)."""
        if self.running:
            raise ProxyError("the proxy is already running")
        upstream = (upstream or "").strip() or None
        if upstream is not None and not upstream.startswith(("http://", "https://")):
            raise ProxyError(f"the upstream must be an http:// or https:// address, not {upstream!r}")
        try:
            self._writer = CaptureWriter(capture, max_bytes=max_bytes, info={"agent": agent, "mode": "window"})
        except OSError as exc:
            raise ProxyError(f"cannot write the capture: {exc.strerror or exc}") from None
        upstreams = Upstreams(override=upstream) if upstream else Upstreams()
        self._proxy = RecordingProxy(self._writer, upstreams, port=port, on_exchange=self._told)
        self._ready.clear()
        self._error = ""
        self._thread = threading.Thread(target=self._run, name="ctxbench-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            self._error = self._error or "the proxy did not start in time"
        if self._error:
            self._thread.join(STOP_TIMEOUT)
            self._writer.close()
            self._thread = None
            raise ProxyError(self._error)
        proxy = self._proxy
        shown = {"all": proxy._redact_url(upstream)} if upstream else {
            p: proxy._redact_url(u) for p, u in upstreams.by_provider.items()}
        return ProxyStarted(proxy.url, self._writer.first, setup_lines(proxy.url), shown)

    def _told(self, rec: dict[str, Any]) -> None:
        if self.on_exchange is not None:
            row = exchange_summary(rec)
            usage = call_usage(str(row.get("family") or ""), row.get("usage")) if row.get("usage") else {}
            row["prompt"], row["completion"] = usage.get("prompt"), usage.get("completion")
            row["call"] = is_call(row)
            self.on_exchange(row)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        assert self._proxy is not None
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await self._proxy.start()
        except ProxyError as exc:
            self._error = str(exc)
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self._proxy.stop()

    def stop(self) -> ProxyStopped | None:
        """Close the proxy and the capture (None when it was not running)."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None or self._writer is None or self._proxy is None:
            return None
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass  # the loop ended already
        thread.join(STOP_TIMEOUT)
        self._writer.close()
        self._thread = None
        return ProxyStopped(self._writer.exchanges, self._writer.first, list(self._writer.paths),
                            list(self._proxy.problems))


__all__ = ["ProxyService", "ProxyStarted", "ProxyStopped", "is_call"]
