"""A tiny MCP server over stdio (newline-delimited JSON-RPC) for the real agents' tests: one tool, ``say``, that
answers ``echo: <word>``. Run as ``python mcp_echo.py``; offline, no dependency."""

from __future__ import annotations

import json
import sys


def answer(request: dict[str, object]) -> dict[str, object]:
    method, params = request.get("method"), request.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo", "version": "1.0"}}
    if method == "tools/list":
        return {"tools": [{"name": "say", "description": "Echo a word", "inputSchema": {
            "type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}]}
    if method == "tools/call":
        args = params.get("arguments")
        word = args.get("word") if isinstance(args, dict) else None
        return {"content": [{"type": "text", "text": f"echo: {word}"}]}
    return {}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("id") is None:  # a notification: no answer
            continue
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
