"""tests/agents/latest.py (`make agents-latest`): the newest versions written, the report read."""

from __future__ import annotations

from tests.agents.latest import failures, newest_package_json, pinned, what_is_new

PACKAGE = {"name": "x", "dependencies": {"@anthropic-ai/claude-code": "2.1.328", "@openai/codex": "0.169.0"},
           "optionalDependencies": {"opencode-linux-x64": "1.18.33"}}


def test_the_newest_versions_replace_the_pinned_ones_and_a_missing_answer_keeps_the_pin() -> None:
    assert pinned(PACKAGE) == {"@anthropic-ai/claude-code": "2.1.328", "@openai/codex": "0.169.0",
                               "opencode-linux-x64": "1.18.33"}
    out = newest_package_json(PACKAGE, {"@anthropic-ai/claude-code": "2.1.332", "@openai/codex": ""})
    assert out["dependencies"] == {"@anthropic-ai/claude-code": "2.1.332", "@openai/codex": "0.169.0"}
    assert out["optionalDependencies"] == {"opencode-linux-x64": "1.18.33"} and out["name"] == "x"
    assert PACKAGE["dependencies"]["@anthropic-ai/claude-code"] == "2.1.328"  # the pinned file is not touched


def test_the_report_names_what_is_new_once() -> None:
    xml = """<testsuites><testsuite>
      <testcase classname="tests.agents.test_claude_code" name="test_tool_calls_read_exactly">
        <failure message="AssertionError: attachment type 'plan_mode' of Claude Code 2.1.332 is not known">x</failure>
      </testcase>
      <testcase classname="tests.agents.test_claude_code" name="test_auto_compaction">
        <failure message="AssertionError: attachment type 'plan_mode' of Claude Code 2.1.332 is not known">x</failure>
      </testcase>
      <testcase classname="tests.agents.test_codex" name="test_exec"><error message="TimeoutError: 60 s"/></testcase>
      <testcase classname="tests.agents.test_codex" name="test_ok"/>
    </testsuite></testsuites>"""
    found = failures(xml)
    assert [t for t, _ in found] == ["tests.agents.test_claude_code::test_tool_calls_read_exactly",
                                     "tests.agents.test_claude_code::test_auto_compaction",
                                     "tests.agents.test_codex::test_exec"]
    assert what_is_new(found) == ["AssertionError: attachment type 'plan_mode' of Claude Code 2.1.332 is not known"]
