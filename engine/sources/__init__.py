"""Readers of other agents' session files (Claude Code, Codex, OpenHands, SWE-agent) into one shape,
format detection, import as a ctxbench session, and discovery of the sessions on this machine."""
