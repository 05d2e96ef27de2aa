"""The agent's tools: one declaration each (spec, argument schema, handler, approval text).

- :mod:`engine.tools.workspace` — ToolResult, ToolError, and path confinement to the workspace and
  the session's ``tool_results/`` and ``dialog/`` folders;
- :mod:`engine.tools.declare` — :class:`~engine.tools.declare.ToolDecl`, the one declaration type;
- :mod:`engine.tools.files` — ``read_file``, ``list_dir``, ``write_file``;
- :mod:`engine.tools.search` — ``search_text``;
- :mod:`engine.tools.shell` — ``run_shell``;
- :mod:`engine.tools.registry` — the registry (specs, names, argument check with jsonschema,
  approval text) and :class:`~engine.tools.registry.ToolBox`, which dispatches through it.
"""
