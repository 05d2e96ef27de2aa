"""The stable import path of the SPEC contract `engine.turns`; the code lives in `engine.context.turns`.

Nothing inside ctxbench imports this module (a test checks it); it exists for callers of the contract.
"""

from engine.context.turns import find_safe_boundary, parse_turn_boundaries

__all__ = ["find_safe_boundary", "parse_turn_boundaries"]
