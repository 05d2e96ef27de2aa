"""One declaration per tool: name, description, JSON-schema parameters, handler and approval text.

The OpenAI spec sent to the model, the argument check (:mod:`engine.tools.registry`), the list of
names and the sentence the approval bar shows all come from a :class:`ToolDecl`.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

# handler(workspace, **checked_arguments) -> the text the model reads (raise ToolError to refuse)
Handler = Callable[..., Awaitable[str]]
ApproveFn = Callable[[str, dict[str, Any]], Awaitable[bool]]
# which ToolBox switch turns a tool on: None = always on
Switch = Literal["write", "shell"]


def _no_approval_text(args: Mapping[str, Any]) -> str:
    return ""


def object_schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """A closed JSON-schema object: these properties, these required, nothing else."""
    return MappingProxyType(
        {
            "type": "object",
            "properties": properties,
            "required": list(required),
            "additionalProperties": False,
        }
    )


@dataclass(frozen=True)
class ToolDecl:
    """Everything about one tool, in one place."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # a JSON schema of type object (see object_schema)
    handler: Handler = field(compare=False)
    needs_approval: bool = False
    approval_text: Callable[[Mapping[str, Any]], str] = field(default=_no_approval_text, compare=False)
    switch: Switch | None = None  # None: always on; else the ToolBox switch that enables it
    disabled_text: str = ""  # why the tool is refused while its switch is off

    @property
    def properties(self) -> dict[str, Any]:
        props: dict[str, Any] = self.parameters.get("properties", {})
        return props

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(self.parameters.get("required", ()))

    def spec(self) -> dict[str, Any]:
        """The OpenAI tool spec (a fresh copy: callers may mutate it)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(dict(self.parameters)),
            },
        }
