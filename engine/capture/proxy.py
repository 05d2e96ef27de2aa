"""The recording reverse proxy: an aiohttp server on loopback that forwards each request to its upstream,
passes the answer back chunk by chunk as it arrives (status, headers and bytes unchanged) and writes the
exchange to a capture (:class:`engine.capture.files.CaptureWriter`).

What an exchange line holds (``"type": "exchange"``):

- ``seq`` (the order requests arrived, from 1), ``id``, ``started`` (UTC ISO), ``method``, ``path`` (with a
  credential query parameter's value redacted), ``family`` (``anthropic`` | ``openai-chat`` |
  ``openai-responses`` | ``gemini`` | ``other``), ``upstream`` (the URL forwarded to, redacted the same way),
  ``outcome`` (``complete``, ``client_disconnected``, ``upstream_error``, ``upstream_unreachable``, ``refused``);
- ``request``: ``headers`` (``[name, value]`` pairs as received, credentials replaced by ``[redacted]``),
  ``content_encoding``, ``body`` (the bytes the client sent, decoded from gzip / deflate / zstd, as text; ``body_b64``
  when they are not UTF-8), ``bytes`` (of the body), ``wire_bytes`` and ``sha256`` (of what was forwarded);
- ``response``: ``status``, ``headers``, ``body`` (what the client received, decoded, as text, its first
  ``keep`` bytes; ``body_truncated``), ``bytes`` and ``sha256`` of the bytes passed to the client (all of them),
  ``stream`` (Server-Sent Events), ``events``, ``message`` (a stream reassembled into the final message; a JSON
  answer parsed), ``usage`` (the provider's own usage object), ``error``;
- ``timings``: ``request_ms`` (reading the request), ``upstream_headers_ms`` (until the upstream's status line),
  ``first_chunk_ms``, ``total_ms`` (each from the request's arrival), ``chunks``.

Credential values (``Authorization``, ``x-api-key``, ``x-goog-api-key``, ``key=`` …) never reach the file: they
are replaced in headers and query, and removed from any body or error that echoes them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import ipaddress
import itertools
import json
import logging
import secrets as pysecrets
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from engine.capture.files import CaptureWriter, now_iso
from engine.capture.redact import header_pairs, query_without_secrets, scrub, scrub_obj
from engine.capture.streams import Assembler, Family, SSEParser, family_of, usage_of

log = logging.getLogger(__name__)

DEFAULT_UPSTREAMS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com",
                     "gemini": "https://generativelanguage.googleapis.com"}
PROVIDER_OF: dict[Family, str] = {"anthropic": "anthropic", "openai-chat": "openai", "openai-responses": "openai",
                                  "gemini": "gemini", "other": "openai"}
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "proxy-connection"})
ZLIB_BITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
DECODABLE = frozenset({*ZLIB_BITS, "zstd"})  # content encodings the proxy reads (and records decoded)


class DecodeError(ValueError):
    """A body that is not valid in its content encoding."""


class _Decoder(Protocol):
    def decompress(self, data: bytes) -> bytes: ...


def _decoder(encoding: str) -> _Decoder | None:
    """A streaming decoder for ``encoding`` (gzip, deflate, zstd), None for identity / an unknown one."""
    if encoding in ZLIB_BITS:
        return zlib.decompressobj(ZLIB_BITS[encoding])
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()
    return None


def _decode_errors(encoding: str) -> tuple[type[Exception], ...]:
    """What the decoder of ``encoding`` raises on a body that is not valid in it (zlib.error, zstandard.ZstdError)."""
    if encoding != "zstd":
        return (zlib.error,)
    import zstandard

    return (zstandard.ZstdError,)


def _decode(raw: bytes, encoding: str) -> bytes:
    """A whole body decoded (DecodeError when it is not valid ``encoding``; a zstd body may hold several frames)."""
    if encoding in ZLIB_BITS:
        try:
            return zlib.decompress(raw, ZLIB_BITS[encoding])
        except zlib.error as exc:
            raise DecodeError(str(exc)) from None
    if encoding != "zstd":
        return raw
    import zstandard

    out: list[bytes] = []
    rest = raw
    try:
        while rest:  # frame after frame: one decompressobj reads one frame
            frame = zstandard.ZstdDecompressor().decompressobj()
            out.append(frame.decompress(rest))
            if not frame.eof:
                raise DecodeError("the zstd body ends inside a frame")
            rest = frame.unused_data
    except zstandard.ZstdError as exc:
        raise DecodeError(str(exc)) from None
    return b"".join(out)
KEEP_BYTES = 8 * 2**20  # bytes of a response body (decoded) kept in the capture
STREAM_KEEP_BYTES = 2**20  # of an event stream (its reassembled message is kept besides, up to TEXT_LIMIT)
MAX_REQUEST = 512 * 2**20  # a larger request body is refused (413)
OFF_LOOP_BYTES = 256 * 2**10  # a request or kept answer larger than this is decoded / encoded in a worker thread
LOOPBACK_NAMES = ("localhost",)


class ProxyError(Exception):
    """The proxy cannot start as asked (a host that is not loopback, a port in use)."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def join_url(base: str, path_qs: str) -> str:
    """``base`` (scheme://host[:port][/prefix]) + the request's path and query: a path that already starts with
    the prefix (``/v1`` of ``https://api.openai.com/v1``) is not given it twice."""
    parts = urlsplit(base)
    prefix = parts.path.rstrip("/")
    path, _, query = path_qs.partition("?")
    if prefix and not (path == prefix or path.startswith(prefix + "/")):
        path = prefix + path
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


@dataclass
class Upstreams:
    """Where each request goes: ``override`` (``--upstream``) for all, else the provider's base for the path's API
    family (``by_provider``: ``anthropic``, ``openai``, ``gemini``; the real services by default)."""

    override: str | None = None
    by_provider: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))

    def base_for(self, family: Family) -> str:
        if self.override:
            return self.override
        provider = PROVIDER_OF.get(family, "openai")
        return self.by_provider.get(provider) or DEFAULT_UPSTREAMS[provider]

    def url_for(self, family: Family, path_qs: str) -> str:
        return join_url(self.base_for(family), path_qs)


def _json_error(status: int, kind: str, message: str) -> web.Response:
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return web.Response(status=status, body=body, content_type="application/json")


def _b64_or_text(data: bytes) -> tuple[str | None, str | None]:
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(data).decode("ascii")


def _request_body(raw: bytes, encoding: str, secrets: set[str]) -> dict[str, Any]:
    """The recorded fields of a request body: its hash as forwarded, and the body decoded (as text, or base64)."""
    body = _decode(raw, encoding)
    text, b64 = _b64_or_text(body)
    out: dict[str, Any] = {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(body),
                           "body": scrub(text, secrets) if text is not None and secrets else text}
    if b64 is not None:
        out["body_b64"] = b64
    return out


class _ResponseRecorder:
    """What passes to the client, counted and hashed in full, decoded and kept up to ``keep`` bytes, and
    (for an event stream) reassembled as it goes."""

    def __init__(self, family: Family, content_type: str, encoding: str, keep: int) -> None:
        self.family = family
        self.sha = hashlib.sha256()
        self.size = 0
        self.chunks = 0
        self.stream = "text/event-stream" in content_type.lower()
        self.keep = min(keep, STREAM_KEEP_BYTES) if self.stream else keep
        self.kept: list[bytes] = []
        self.kept_size = 0
        self.truncated = False
        self.encoding = encoding
        self.undecoded = bool(encoding) and encoding not in DECODABLE and encoding != "identity"
        self._inflate = _decoder(encoding)
        self.parser = SSEParser() if self.stream else None
        self.assembler = Assembler(family) if self.stream else None
        self.problem = ""

    def feed(self, chunk: bytes) -> None:
        self.sha.update(chunk)
        self.size += len(chunk)
        self.chunks += 1
        if self.undecoded:
            return
        data = chunk
        if self._inflate is not None:
            try:
                data = self._inflate.decompress(chunk)
            except _decode_errors(self.encoding) as exc:  # recorded as not decoded, passed on as is
                self.problem = f"the {self.encoding} body could not be decoded: {exc}"
                self.undecoded = True
                return
        self._keep(data)
        if self.parser is not None and self.assembler is not None:
            for event, payload in self.parser.feed(data):
                self.assembler.add(event, payload)

    def _keep(self, data: bytes) -> None:
        room = self.keep - self.kept_size
        if room <= 0:
            self.truncated = self.truncated or bool(data)
            return
        if len(data) > room:
            data, self.truncated = data[:room], True
        self.kept.append(data)
        self.kept_size += len(data)

    def finish(self, secrets: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"bytes": self.size, "sha256": self.sha.hexdigest(), "stream": self.stream}
        if self.parser is not None and self.assembler is not None:
            for event, payload in self.parser.close():
                self.assembler.add(event, payload)
        body = b"".join(self.kept)
        self.kept = [body]
        message: Any = None
        if self.undecoded:
            out["body"] = None
            out["body_note"] = self.problem or f"{self.encoding}-encoded: not decoded (no decoder)"
        else:
            text, b64 = _b64_or_text(body)
            if text is None and self.truncated:  # cut inside a UTF-8 sequence
                text, b64 = body.decode("utf-8", errors="ignore"), None
            out["body"] = scrub(text, secrets) if text is not None and secrets else text
            if b64 is not None:
                out["body_b64"] = b64
            out["body_truncated"] = self.truncated
        if self.assembler is not None:
            message = self.assembler.result()
            out["events"] = self.parser.events if self.parser is not None else 0
            if self.assembler.truncated:
                out["message_truncated"] = True
            if self.assembler.errors:
                out["stream_errors"] = self.assembler.errors[:20]
        elif not self.undecoded and not self.truncated and body[:1] in (b"{", b"["):
            with contextlib.suppress(ValueError, RecursionError):
                message = json.loads(body)
        if message is not None:
            out["message"] = scrub_obj(message, secrets) if secrets else message
            out["usage"] = usage_of(self.family, message)
        return out


class RecordingProxy:
    """``await start()`` listens on ``host``:``port`` (loopback only; port 0: a free one), ``await stop()``
    ends it. Each exchange goes to ``writer`` (none: nothing written) and, as a dict, to ``on_exchange``."""

    def __init__(self, writer: CaptureWriter | None, upstreams: Upstreams | None = None, *,
                 host: str = "127.0.0.1", port: int = 0, keep: int = KEEP_BYTES,
                 on_exchange: Callable[[dict[str, Any]], None] | None = None,
                 connect_timeout: float = 30.0, read_timeout: float | None = 600.0,
                 shutdown_timeout: float = 5.0) -> None:
        if not is_loopback(host):
            raise ProxyError(f"the proxy listens on loopback only (127.0.0.1, ::1, localhost), not {host!r}")
        self.writer = writer
        self.upstreams = upstreams or Upstreams()
        self.host, self.port = host, port
        self.keep = keep
        self.shutdown_timeout = shutdown_timeout
        self.on_exchange = on_exchange
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        self._seq = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.exchanges = 0
        self.problems: list[str] = []

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> RecordingProxy:
        app = web.Application(client_max_size=MAX_REQUEST)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._session = aiohttp.ClientSession(
            timeout=self._timeout, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
            connector=aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True), trust_env=False)
        runner = web.AppRunner(app, access_log=None, auto_decompress=False, handle_signals=False,
                               shutdown_timeout=self.shutdown_timeout)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            await self._session.close()
            raise ProxyError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from None
        self._runner = runner
        address = runner.addresses[0]
        self.port = int(address[1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RecordingProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ one exchange
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        seq = next(self._seq)
        rec: dict[str, Any] = {"type": "exchange", "seq": seq, "id": f"x{seq}-{pysecrets.token_hex(4)}",
                               "started": now_iso(), "method": request.method}
        path, path_secrets = self._path(request.raw_path)
        raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers]
        headers, secrets = header_pairs(raw_headers)
        secrets |= path_secrets
        hdr_map = {k: v for k, v in request.headers.items()}
        family = family_of(request.path, hdr_map)
        rec.update(path=path, family=family)
        req: dict[str, Any] = {"headers": headers}
        rec["request"] = req
        remote = request.remote or ""
        if remote and not is_loopback(remote):
            return await self._refuse(rec, secrets, 403, "forbidden", "the recording proxy answers loopback only")
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._refuse(rec, secrets, 501, "websocket_not_supported",
                                      "ctxbench's recording proxy does not pass WebSocket upgrades through: "
                                      "the agent should use HTTP (streamed with Server-Sent Events) instead")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return await self._refuse(rec, secrets, 413, "request_too_large",
                                      f"request bodies over {MAX_REQUEST // 2**20} MiB are not passed through")
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        req.update(content_encoding=encoding or None, wire_bytes=len(raw))
        if encoding and encoding != "identity" and encoding not in DECODABLE:
            return await self._refuse(
                rec, secrets, 415, "unsupported_content_encoding",
                f"ctxbench's recording proxy cannot read {encoding}-compressed request bodies (no {encoding} decoder "
                "is installed) and records nothing it cannot read: send the body uncompressed, gzip, deflate or zstd")
        try:  # a large body is hashed and decoded off the loop (other streams go on meanwhile)
            if len(raw) > OFF_LOOP_BYTES:
                req.update(await asyncio.to_thread(_request_body, raw, encoding, secrets))
            else:
                req.update(_request_body(raw, encoding, secrets))
        except DecodeError as exc:
            return await self._refuse(rec, secrets, 400, "bad_content_encoding",
                                      f"the request body is not valid {encoding}: {exc}")
        rec["timings"] = timings = {"request_ms": _ms(t0)}
        url = self.upstreams.url_for(family, request.raw_path)
        rec["upstream"] = self._redact_url(url)
        if self._is_self(url):
            return await self._refuse(rec, secrets, 508, "loop_detected",
                                      f"the upstream {rec['upstream']} is this proxy itself: give --upstream the "
                                      "provider's address")
        fwd = CIMultiDict[str]()
        for name, value in raw_headers:
            if name.lower() not in HOP_BY_HOP and name.lower() not in ("host", "content-length", "expect"):
                fwd.add(name, value)
        assert self._session is not None
        try:
            upstream_cm = self._session.request(
                request.method, url, headers=fwd, data=raw if raw or request.body_exists else None,
                allow_redirects=False, skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                compress=None)
            up = await upstream_cm.__aenter__()
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            message = scrub(f"ctxbench proxy: cannot reach the upstream {rec['upstream']}: "
                            f"{type(exc).__name__}: {exc}", secrets)
            rec["outcome"] = "upstream_unreachable"
            rec["response"] = {"status": 502, "error": message}
            timings["total_ms"] = _ms(t0)
            await self._record(rec)
            return _json_error(502, "proxy_error", message)
        try:
            return await self._relay(request, up, rec, family, secrets, t0)
        finally:
            await upstream_cm.__aexit__(None, None, None)

    async def _relay(self, request: web.Request, up: aiohttp.ClientResponse, rec: dict[str, Any], family: Family,
                     secrets: set[str], t0: float) -> web.StreamResponse:
        timings = rec["timings"]
        timings["upstream_headers_ms"] = _ms(t0)
        resp = web.StreamResponse(status=up.status, reason=up.reason)
        resp_headers: list[tuple[str, str]] = []
        for name, value in up.raw_headers:
            key, val = name.decode("latin-1"), value.decode("latin-1")
            resp_headers.append((key, val))
            if key.lower() not in HOP_BY_HOP:
                resp.headers.add(key, val)
        shown, more = header_pairs(resp_headers)
        secrets |= more
        recorder = _ResponseRecorder(family, up.headers.get("Content-Type", ""),
                                     up.headers.get("Content-Encoding", "").strip().lower(), self.keep)
        response: dict[str, Any] = {"status": up.status, "headers": shown}
        rec["response"] = response
        outcome = "complete"
        await resp.prepare(request)
        try:
            async for chunk in up.content.iter_any():
                if recorder.chunks == 0:
                    timings["first_chunk_ms"] = _ms(t0)
                try:
                    await resp.write(chunk)
                except (ConnectionResetError, RuntimeError):  # the client went away: stop reading upstream
                    recorder.feed(chunk)
                    outcome = "client_disconnected"
                    break
                recorder.feed(chunk)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            outcome = "upstream_error"
            response["error"] = scrub(f"{type(exc).__name__}: {exc}", secrets)
        except asyncio.CancelledError:
            rec["outcome"] = "cancelled"
            response.update(recorder.finish(secrets))
            timings.update(total_ms=_ms(t0), chunks=recorder.chunks)
            with contextlib.suppress(Exception):
                self._record_now(rec)
            raise
        if recorder.kept_size > OFF_LOOP_BYTES:
            response.update(await asyncio.to_thread(recorder.finish, secrets))
        else:
            response.update(recorder.finish(secrets))
        timings.update(total_ms=_ms(t0), chunks=recorder.chunks)
        rec["outcome"] = outcome
        await self._record(rec)  # durable before the client sees the end of the answer
        if outcome == "complete":
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await resp.write_eof()
        elif request.transport is not None:  # the answer is incomplete: the client must not take it as whole
            request.transport.close()
        return resp

    async def _refuse(self, rec: dict[str, Any], secrets: set[str], status: int, kind: str,
                      message: str) -> web.Response:
        rec["outcome"] = "refused"
        rec["response"] = {"status": status, "error": message}
        await self._record(rec)
        return _json_error(status, kind, message)

    async def _record(self, rec: dict[str, Any]) -> None:
        await asyncio.to_thread(self._record_now, rec)

    def _record_now(self, rec: dict[str, Any]) -> None:
        self.exchanges += 1
        if self.writer is not None:
            try:
                self.writer.append(rec)
            except (OSError, ValueError) as exc:
                self.problems.append(f"exchange {rec.get('seq')} not written: {exc}")
        if self.on_exchange is not None:
            try:
                self.on_exchange(rec)
            except Exception as exc:  # listener boundary (the CLI's or the window's code): its failure, whatever
                # it is, never stops the proxy
                log.warning("exchange listener failed", exc_info=True)
                self.problems.append(f"exchange listener failed: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _path(raw_path: str) -> tuple[str, set[str]]:
        path, sep, query = raw_path.partition("?")
        if not sep:
            return path, set()
        clean, found = query_without_secrets(query)
        return f"{path}?{clean}", found

    def _redact_url(self, url: str) -> str:
        parts = urlsplit(url)
        query, _ = query_without_secrets(parts.query)
        netloc = parts.netloc.rpartition("@")[2]  # user:password@ never written
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))

    def _is_self(self, url: str) -> bool:
        parts = urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        return port == self.port and is_loopback(parts.hostname or "")


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)

