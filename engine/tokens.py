"""The stable import path of the SPEC contract `engine.tokens`; the code lives in `engine.context.tokens`.

Nothing inside ctxbench imports this module (a test checks it); it exists for callers of the contract.
"""

from engine.context.tokens import estimate_message_tokens, estimate_tool_defs_tokens

__all__ = ["estimate_message_tokens", "estimate_tool_defs_tokens"]
