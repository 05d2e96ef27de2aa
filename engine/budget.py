"""The stable import path of the SPEC contract `engine.budget`; the code lives in `engine.context.budget`.

Nothing inside ctxbench imports this module (a test checks it); it exists for callers of the contract.
"""

from engine.context.budget import is_over_context_budget

__all__ = ["is_over_context_budget"]
