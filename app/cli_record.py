"""``ctxbench proxy`` and ``ctxbench record``: the recording proxy (:mod:`engine.capture.proxy`) from the command
line.

    ctxbench proxy [--port N] [--upstream URL] [--capture FILE] [--max-mb N]
    ctxbench record [--upstream URL] [--capture FILE] [--max-mb N] [--port N] -- COMMAND [ARG ...]

``proxy`` listens on 127.0.0.1 (``--port``, default 8788; 0: a free port) until SIGINT / SIGTERM, for agents
started elsewhere (point their base URL at it); it prints ``{"type": "proxy", "url", "capture", "env"}`` (the
variables to set), then one ``{"type": "exchange", …}`` line per exchange, and ``{"type": "stopped", …}``.

``record`` starts the proxy on a free port, runs COMMAND with its base-URL variables pointed at it
(``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``, ``GOOGLE_GEMINI_BASE_URL``; loopback added to
``NO_PROXY``), the terminal left to it, and exits with its status; what it recorded is said on stderr. Each
request goes to ``--upstream`` when given, else to the address the agent's own environment named for that API
(``ANTHROPIC_BASE_URL`` …), else to the provider's real one. Agents configured by a file (Codex's
``model_providers``, OpenCode's ``opencode.json``) are told the line to add.

The capture is ``<data dir>/captures/capture-<time>-<id>.jsonl`` unless ``--capture`` names a file; it opens
with ``ctxbench import`` (or Sources) like any agent's session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.capture.agents import BASE_URL_VARS, FILE_CONFIGURED, exchange_summary
from engine.capture.files import MAX_BYTES, CaptureWriter

if TYPE_CHECKING:  # the proxy (aiohttp) is imported by `proxy` and `record` only: every other command starts faster
    from engine.capture.proxy import RecordingProxy, Upstreams

DEFAULT_PORT = 8788
# BASE_URL_VARS, FILE_CONFIGURED: the settings agents read, declared once in engine.capture.agents (the window's
# File → Record an agent… shows the same)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("proxy", help="run the recording proxy on 127.0.0.1 for agents started elsewhere")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; "
                                                                   "0: a free one)")
    _common(p)
    r = sub.add_parser("record", help="run an agent through the recording proxy: ctxbench record -- COMMAND …")
    r.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    _common(r)
    r.add_argument("agent", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the agent and its arguments")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--upstream", metavar="URL", help="send every request here (default: the provider's address for "
                                                     "the request's API)")
    p.add_argument("--capture", type=Path, metavar="FILE", help="the capture file (default: a new one in "
                                                                "<data dir>/captures)")
    p.add_argument("--max-mb", type=float, default=MAX_BYTES / 2**20, metavar="N",
                   help=f"roll the capture over to a new part past N MiB (default {MAX_BYTES // 2**20})")


def child_env(base: dict[str, str], url: str) -> dict[str, str]:
    """``base`` with every provider's base-URL variables pointed at the proxy (loopback kept off any proxy)."""
    env = dict(base)
    for pairs in BASE_URL_VARS.values():
        for name, suffix in pairs:
            env[name] = url + suffix
    for name in ("NO_PROXY", "no_proxy"):
        have = [h for h in env.get(name, "").split(",") if h]
        env[name] = ",".join([*have, *(h for h in ("127.0.0.1", "localhost", "::1") if h not in have)])
    return env


def upstreams_from(env: dict[str, str], override: str | None, own_url: str = "") -> Upstreams:
    """``--upstream``, else each provider's address from the agent's own environment, else the real one."""
    from engine.capture.proxy import DEFAULT_UPSTREAMS, Upstreams

    by_provider = dict(DEFAULT_UPSTREAMS)
    for provider, pairs in BASE_URL_VARS.items():
        for name, _ in pairs:
            value = env.get(name, "").strip()
            if value and not (own_url and value.startswith(own_url)):
                by_provider[provider] = value
                break
    return Upstreams(override=override, by_provider=by_provider)


def _writer(args: argparse.Namespace, info: dict[str, Any]) -> CaptureWriter:
    max_bytes = max(1, int(args.max_mb * 2**20))
    try:
        return CaptureWriter(args.capture, max_bytes=max_bytes, info=info)
    except OSError as exc:
        raise OSError(f"cannot write the capture: {exc.strerror or exc}") from None


def _upstream_info(upstreams: Upstreams, proxy: RecordingProxy) -> dict[str, str]:
    shown = {p: proxy._redact_url(u) for p, u in upstreams.by_provider.items()}
    if upstreams.override:
        shown = {"all": proxy._redact_url(upstreams.override)}
    return shown


def exchange_line(rec: dict[str, Any]) -> dict[str, Any]:
    return exchange_summary(rec)


def cmd_proxy(args: argparse.Namespace, out: Any, error: type[Exception]) -> int:
    return asyncio.run(_proxy(args, out, error))


async def _proxy(args: argparse.Namespace, out: Any, error: type[Exception]) -> int:
    from engine.capture.proxy import ProxyError, RecordingProxy
    upstreams = upstreams_from({}, args.upstream)
    try:
        writer = _writer(args, {"agent": "", "mode": "proxy"})
    except OSError as exc:
        raise error(str(exc)) from None
    proxy = RecordingProxy(writer, upstreams, port=args.port, on_exchange=lambda rec: out(exchange_line(rec)))
    try:
        await proxy.start()
    except ProxyError as exc:
        writer.close()
        raise error(str(exc)) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    out({"type": "proxy", "url": proxy.url, "capture": str(writer.path), "upstreams": _upstream_info(upstreams, proxy),
         "env": {name: proxy.url + suffix for pairs in BASE_URL_VARS.values() for name, suffix in pairs}})
    try:
        await stop.wait()
    finally:
        await proxy.stop()
        writer.close()
    out({"type": "stopped", "exchanges": writer.exchanges, "capture": str(writer.first),
         "parts": [str(p) for p in writer.paths], "problems": proxy.problems})
    return 0


def cmd_record(args: argparse.Namespace, out: Any, error: type[Exception], usage: type[Exception]) -> int:
    command = list(args.agent)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise usage("record needs the agent to run: ctxbench record [--upstream URL] -- COMMAND [ARG ...]")
    return asyncio.run(_record(args, command, error))


async def _record(args: argparse.Namespace, command: list[str], error: type[Exception]) -> int:
    from engine.capture.proxy import ProxyError, RecordingProxy
    env = dict(os.environ)
    upstreams = upstreams_from(env, args.upstream)
    agent = Path(command[0]).name
    try:
        writer = _writer(args, {"agent": agent, "mode": "record", "cwd": os.getcwd()})
    except OSError as exc:
        raise error(str(exc)) from None
    proxy = RecordingProxy(writer, upstreams, port=args.port)
    try:
        await proxy.start()
    except ProxyError as exc:
        writer.close()
        raise error(str(exc)) from None
    _say(f"recording {agent} through {proxy.url} to {writer.path}")
    for pattern, hint in FILE_CONFIGURED.items():
        if fnmatch.fnmatchcase(agent, pattern):
            _say(hint.format(url=proxy.url))
    code = 1
    try:
        try:
            proc = await asyncio.create_subprocess_exec(*command, env=child_env(env, proxy.url))
        except OSError as exc:
            raise error(f"cannot run {command[0]}: {exc.strerror or exc}") from None
        loop = asyncio.get_running_loop()
        # Ctrl-C reaches the agent from the terminal; the recording ends when the agent does
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, lambda: None)
            loop.add_signal_handler(signal.SIGTERM, lambda: proc.send_signal(signal.SIGTERM))
        returned = await proc.wait()
        code = returned if returned >= 0 else 128 - returned
    finally:
        await proxy.stop()
        writer.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                asyncio.get_running_loop().remove_signal_handler(sig)
    parts = f" ({len(writer.paths)} parts)" if len(writer.paths) > 1 else ""
    _say(f"{writer.exchanges} exchange(s) recorded in {writer.first}{parts}; open it with: ctxbench import "
         f"{writer.first} --session DIR")
    for problem in proxy.problems[:5]:
        _say(f"warning: {problem}")
    return code


def _say(text: str) -> None:
    print(f"ctxbench: {text}", file=sys.stderr, flush=True)
