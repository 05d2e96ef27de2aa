"""The agent's tools: one declaration each (spec, argument schema, approval text)."""
