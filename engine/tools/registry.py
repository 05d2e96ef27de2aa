"""The agent's built-in tools: one registry of declarations, the argument check, and the ToolBox.

Tools: ``read_file``, ``list_dir``, ``search_text`` (always on), ``write_file`` and ``run_shell`` (off by
default; when enabled, every call needs the user's approval through the injected ``approve`` callback).
Each is declared once (:class:`~engine.tools.declare.ToolDecl`, in its family's module); the OpenAI
specs, the names, the argument check (JSON schema, :mod:`jsonschema`) and the approval text all come
from that declaration. Paths are confined as :mod:`engine.tools.workspace` says.

Errors never raise: bad JSON arguments, unknown tools, unknown parameters, I/O errors and exceptions
all become a :class:`ToolResult` with ``ok=False``. Only cancellation propagates.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.store.secrets import scrub_known
from engine.tools.declare import ApproveFn, ToolDecl
from engine.tools.files import (
    LIST_DIR,
    LIST_MAX_ENTRIES,
    READ_DEFAULT_LINES,
    READ_FILE,
    READ_MAX_BYTES,
    READ_MAX_LINES,
    WRITE_FILE,
    WRITE_MAX_BYTES,
)
from engine.tools.search import SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS, SEARCH_TEXT
from engine.tools.shell import RUN_SHELL, SHELL_DEFAULT_TIMEOUT, SHELL_MAX_TIMEOUT
from engine.tools.workspace import ToolError, ToolResult, Workspace

log = logging.getLogger(__name__)

__all__ = [
    "LIST_MAX_ENTRIES",
    "READ_DEFAULT_LINES",
    "READ_MAX_BYTES",
    "READ_MAX_LINES",
    "SEARCH_DEFAULT_RESULTS",
    "SEARCH_MAX_RESULTS",
    "SHELL_DEFAULT_TIMEOUT",
    "SHELL_MAX_TIMEOUT",
    "TOOLS",
    "WRITE_MAX_BYTES",
    "ApproveFn",
    "ToolBox",
    "ToolDecl",
    "ToolError",
    "ToolResult",
    "approval_text",
    "declaration",
    "parse_arguments",
]

# the order the model sees them in
TOOLS: tuple[ToolDecl, ...] = (READ_FILE, LIST_DIR, SEARCH_TEXT, WRITE_FILE, RUN_SHELL)
_BY_NAME: dict[str, ToolDecl] = {decl.name: decl for decl in TOOLS}
_PY_TYPE_NAMES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
_validators: dict[str, Any] = {}


def declaration(name: str) -> ToolDecl | None:
    """The declaration of the tool called ``name``, or None."""
    return _BY_NAME.get(name)


def approval_text(name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
    """Why a call of ``name`` needs the user's yes (empty for a tool that needs none)."""
    decl = _BY_NAME.get(name)
    if decl is None:
        return ""
    args: Any = arguments
    if not isinstance(arguments, Mapping):
        try:
            args = json.loads(arguments) if arguments else {}
        except (ValueError, RecursionError):
            args = {}
    return decl.approval_text(args if isinstance(args, Mapping) else {})


# ---------------------------------------------------------------------- arguments


def _coerce(value: Any, json_type: str | None) -> Any:
    """Accept the forms small models often send: numbers as strings, whole floats, "true"/"false"."""
    if json_type == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            try:
                return int(value.strip())
            except ValueError:  # digits int() does not read, e.g. "²"
                return value
    elif json_type == "number":
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return value
    elif json_type == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _validator(decl: ToolDecl) -> Any:
    """The compiled JSON-schema validator of one tool (jsonschema is imported on first use)."""
    found = _validators.get(decl.name)
    if found is None:
        from jsonschema import Draft202012Validator

        schema = copy.deepcopy(dict(decl.parameters))
        Draft202012Validator.check_schema(schema)
        found = _validators[decl.name] = Draft202012Validator(schema)
    return found


def _describe(decl: ToolDecl, error: Any, args: dict[str, Any], raw: dict[str, Any]) -> str:
    """One schema error as the model reads it: which argument, and what was wrong with it."""
    tool = decl.name
    if error.validator == "additionalProperties":
        unknown = sorted(set(args) - set(decl.properties))
        return f"{tool}: unknown argument(s) {', '.join(unknown)} (expected: {', '.join(decl.properties)})"
    if error.validator == "required":
        missing = [k for k in decl.required if k not in args]
        return f"{tool}: missing required argument(s) {', '.join(missing)}"
    key = str(error.path[0]) if error.path else ""
    if error.validator == "type":
        expected = _PY_TYPE_NAMES.get(str(error.validator_value), str(error.validator_value))
        shown = json.dumps(raw.get(key), default=repr)[:80]
        return f"{tool}: argument {key!r} must be {expected}, got {shown}"
    if error.validator == "minimum":
        return f"{tool}: {key} must be {error.validator_value} or more, got {error.instance}"
    return f"{tool}: argument {key!r}: {error.message}"


def _error_rank(decl: ToolDecl, error: Any) -> tuple[int, int]:
    order = list(decl.properties)
    if error.validator == "additionalProperties":
        return (0, 0)
    if error.validator == "required":
        return (1, 0)
    key = str(error.path[0]) if error.path else ""
    return (2, order.index(key) if key in order else len(order))


def _decode(tool: str, arguments_json: str | Mapping[str, Any] | None) -> Any:
    if isinstance(arguments_json, Mapping):
        return dict(arguments_json)
    if arguments_json is None or not str(arguments_json).strip():
        return {}
    try:
        return json.loads(arguments_json)
    except json.JSONDecodeError as exc:
        snippet = str(arguments_json)[:120]
        raise ToolError(f"{tool}: arguments are not valid JSON ({exc.msg} at position {exc.pos}): {snippet}") from None
    except RecursionError:
        raise ToolError(f"{tool}: arguments are not valid JSON (nested too deeply)") from None


def parse_arguments(tool: str, arguments_json: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """Decode and check a tool call's arguments against its schema; raise ToolError naming the problem.

    A ``null`` argument counts as absent; numbers sent as strings (and "true"/"false") are accepted.
    """
    decl = _BY_NAME.get(tool)
    if decl is None:
        raise ToolError(f"unknown tool {tool!r} (available: {', '.join(_BY_NAME)})")
    raw = _decode(tool, arguments_json)
    if not isinstance(raw, dict):
        raise ToolError(f"{tool}: arguments must be a JSON object, got {type(raw).__name__}")
    props = decl.properties
    args = {
        k: _coerce(v, props[k].get("type")) if k in props else v
        for k, v in raw.items()
        if not (v is None and k in props)
    }
    errors = list(_validator(decl).iter_errors(args))
    if errors:
        first = min(errors, key=lambda e: _error_rank(decl, e))
        raise ToolError(_describe(decl, first, args, raw))
    return args


# ---------------------------------------------------------------------- the tool box


class ToolBox(Workspace):
    """The agent's built-in tools for one workspace and one session folder."""

    def __init__(
        self,
        workspace: Path,
        session_dir: Path,
        *,
        allow_write: bool = False,
        allow_shell: bool = False,
        approve: ApproveFn | None = None,
    ) -> None:
        super().__init__(workspace, session_dir)
        self.allow_write = allow_write
        self.allow_shell = allow_shell
        self.approve = approve

    def enabled(self, decl: ToolDecl) -> bool:
        if decl.switch == "write":
            return self.allow_write
        if decl.switch == "shell":
            return self.allow_shell
        return True

    def declarations(self) -> list[ToolDecl]:
        """The enabled tools, in the order the model sees them."""
        return [decl for decl in TOOLS if self.enabled(decl)]

    def names(self) -> list[str]:
        return [decl.name for decl in self.declarations()]

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI tool specs of the enabled tools (fresh copies: callers may mutate them)."""
        return [decl.spec() for decl in self.declarations()]

    async def run(self, name: str, arguments_json: str | dict[str, Any] | None) -> ToolResult:
        """Run one tool call; every failure becomes a result with ``ok=False``."""
        try:
            decl = _BY_NAME.get(name)
            if decl is None:
                raise ToolError(f"unknown tool {name!r} (available: {', '.join(self.names())})")
            if not self.enabled(decl):
                raise ToolError(decl.disabled_text or f"{name} is disabled")
            args = parse_arguments(name, arguments_json)
            if decl.needs_approval:
                await self._ask_approval(name, args)
            text = await decl.handler(self, **args)
            return ToolResult(scrub_known(text), True)
        except asyncio.CancelledError:
            raise
        except ToolError as exc:
            return ToolResult(scrub_known(f"error: {exc}"), False)
        except Exception as exc:  # tool boundary: the tool failed (a bug, a disk error, anything it raises);
            # the model reads the reason, the turn goes on
            log.warning("tool %s failed", name, exc_info=True)
            return ToolResult(scrub_known(f"error: {name} failed: {type(exc).__name__}: {exc}"), False)

    async def _ask_approval(self, name: str, args: dict[str, Any]) -> None:
        if self.approve is None:
            raise ToolError(f"{name} needs the user's approval, and no one can be asked here")
        try:
            ok = await self.approve(name, dict(args))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the bridge to whoever approves (the window's dialog, the terminal)
            log.warning("asking for approval of %s failed", name, exc_info=True)
            raise ToolError(f"{name}: asking for approval failed ({exc})") from None
        if not ok:
            raise ToolError(f"the user did not approve this {name} call")
