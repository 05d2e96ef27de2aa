"""What agents read to reach the recording proxy, declared once: the environment variables of each provider's base
URL (:data:`BASE_URL_VARS`), the lines for the agents configured by a file (:data:`FILE_CONFIGURED`), the
``export`` lines to show (:func:`setup_lines`), and one exchange as a row (:func:`exchange_summary`). ``ctxbench
record`` / ``ctxbench proxy`` (app.cli_record) and the window's File → Record an agent…
(:mod:`engine.workbench.recording`) use the same.
"""

from __future__ import annotations

import shlex
from typing import Any

# the environment variables each provider's clients read for their base URL, and the path the value carries
BASE_URL_VARS: dict[str, tuple[tuple[str, str], ...]] = {
    "anthropic": (("ANTHROPIC_BASE_URL", ""),),
    "openai": (("OPENAI_BASE_URL", "/v1"), ("OPENAI_API_BASE", "/v1")),
    "gemini": (("GOOGLE_GEMINI_BASE_URL", ""), ("GEMINI_BASE_URL", "")),
}
# agents whose provider may be set in a file, by the name of their program (a shell pattern), and the line to add
FILE_CONFIGURED = {
    "codex*": 'a model provider of ~/.codex/config.toml (model_providers.<id>) needs: base_url = "{url}/v1" '
             "(the built-in OpenAI provider follows OPENAI_BASE_URL, set)",
    "opencode*": 'a provider of opencode.json needs: "options": {{"baseURL": "{url}/v1"}} '
                "(Anthropic models follow ANTHROPIC_BASE_URL, set)",
}


def proxy_env(url: str) -> dict[str, str]:
    """Every base-URL variable pointed at the proxy at ``url``."""
    return {name: url + suffix for pairs in BASE_URL_VARS.values() for name, suffix in pairs}


def setup_lines(url: str) -> list[str]:
    """What to set for an agent started elsewhere to go through the proxy at ``url``: the ``export`` lines of the
    environment (with loopback kept off any HTTP proxy), then the line for the agents configured by a file."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in proxy_env(url).items()]
    lines.append('export NO_PROXY="127.0.0.1,localhost,::1${NO_PROXY:+,$NO_PROXY}"')
    lines.append("# Codex: " + FILE_CONFIGURED["codex*"].format(url=url))
    lines.append("# OpenCode: " + FILE_CONFIGURED["opencode*"].format(url=url))
    return lines


def exchange_summary(rec: dict[str, Any]) -> dict[str, Any]:
    """One exchange as a row: seq, method, path, API family, status, outcome, the usage object, total ms."""
    response = rec.get("response") or {}
    return {"type": "exchange", "seq": rec.get("seq"), "method": rec.get("method"), "path": rec.get("path"),
            "family": rec.get("family"), "status": response.get("status"), "outcome": rec.get("outcome"),
            "usage": response.get("usage"), "ms": (rec.get("timings") or {}).get("total_ms")}


__all__ = ["BASE_URL_VARS", "FILE_CONFIGURED", "exchange_summary", "proxy_env", "setup_lines"]
