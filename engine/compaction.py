"""The stable import path of the SPEC contract `engine.compaction`; the code lives in `engine.context.plan`.

Nothing inside ctxbench imports this module (a test checks it); it exists for callers of the contract.
"""

from engine.context.plan import force_compression

__all__ = ["force_compression"]
