"""The kinds of lines, items, events, turn items and content parts of a Codex rollout, and what
:mod:`engine.sources.codex` does with each: read, or left out on purpose with the reason (counted in
``session.ignored``). A kind in none of these is unknown: skipped, said (and the real-agent tests fail on it)."""

from __future__ import annotations

READ_RECORDS = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted",
                          "token_usage_record", "world_state", "inter_agent_communication_metadata"})
# Record types left out on purpose, and why (counted by type in the import report).
IGNORED_RECORDS: dict[str, str] = {}
KNOWN_TYPES = READ_RECORDS | frozenset(IGNORED_RECORDS)

READ_ITEMS = frozenset({"message", "reasoning", "function_call", "custom_tool_call", "function_call_output",
                        "custom_tool_call_output", "web_search_call", "local_shell_call", "compaction",
                        "compaction_summary", "additional_tools", "agent_message"})
# ``response_item`` types left out on purpose, and why.
IGNORED_ITEMS: dict[str, str] = {
    "ghost_snapshot": "a git snapshot Codex keeps to undo a turn; never sent to the model",
}
KNOWN_ITEMS = READ_ITEMS | frozenset(IGNORED_ITEMS)

READ_EVENTS = frozenset({"token_count", "task_started", "context_compacted", "turn_aborted"})
_ECHO = "the terminal's copy of a response item, which is read instead"
_TOOL_END = "a tool's end as the terminal shows it; what the model saw is the call's output item"
# ``event_msg`` types left out on purpose, and why.
IGNORED_EVENTS: dict[str, str] = {
    "user_message": _ECHO,
    "agent_message": _ECHO,
    "agent_reasoning": _ECHO,
    "agent_reasoning_raw_content": _ECHO,
    "item_completed": "the terminal's record of a finished turn item (user message, command, agent message); "
                      "what the model saw is its response item (a SubAgentActivity item is read: the subagent a "
                      "spawn_agent call started)",
    "task_complete": "the end of a turn; its last agent message is also a response item",
    "thread_settings_applied": "the thread's settings (model, cwd, approvals); each turn's model is read "
                               "from turn_context",
    "thread_goal_updated": "a goal's status shown by the terminal; not sent as such",
    "exec_command_end": _TOOL_END,
    "patch_apply_end": _TOOL_END,
    "mcp_tool_call_end": _TOOL_END,
    "web_search_end": _TOOL_END,
    "image_generation_end": _TOOL_END,
}
KNOWN_EVENTS = READ_EVENTS | frozenset(IGNORED_EVENTS)

# The turn items of ``item_completed`` events: what the terminal shows of a finished item. ``SubAgentActivity`` is
# read (the subagent a ``spawn_agent`` call started: its thread); the others are the terminal's copies of what the
# response items hold (counted as ``event_msg/item_completed``). These are the kinds Codex 0.171 was seen writing
# (tests/agents/test_codex.py): the reader leaves out any other the same way, and the agent tests fail on it.
READ_TURN_ITEMS = frozenset({"SubAgentActivity"})
IGNORED_TURN_ITEMS: dict[str, str] = {
    "UserMessage": _ECHO,
    "AgentMessage": _ECHO,
    "CommandExecution": _TOOL_END,
    "ContextCompaction": "the terminal's mark of a compaction; the compaction is read from its compacted line",
    "CollabAgentToolCall": "a collaboration tool call (wait_agent, send_message) as the terminal shows it; the "
                           "call and its output are response items",
}
KNOWN_TURN_ITEMS = READ_TURN_ITEMS | frozenset(IGNORED_TURN_ITEMS)
# The content parts of response items the reader reads (message and agent message content, tool outputs, reasoning
# summaries): text parts, an image (a part of its own: counted as an image, its data not imported) and an agent
# message's encrypted part (shown as such, sized by its length).
KNOWN_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text", "input_image",
                         "encrypted_content"})
