"""The stable import path of the SPEC contract `engine.offload`; the code lives in `engine.context.offload`.

Nothing inside ctxbench imports this module (a test checks it); it exists for callers of the contract.
"""

from engine.context.offload import truncate_text_output

__all__ = ["truncate_text_output"]
