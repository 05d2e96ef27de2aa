"""engine.usage.report: the range "the last n days" (today, UTC, the last), the days a chart of a range spans,
and the report's rows: projects by the full path of their folder, sessions titled by their first prompt."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from engine.usage.index import UsageIndex
from engine.usage.report import last_days, span, usage_report


def test_the_last_n_days_end_today() -> None:
    today = date(2026, 11, 23)
    assert last_days(30, today) == (date(2026, 10, 25), today)
    assert last_days(1, today) == (today, today)
    assert last_days(0, today) == (None, None) and last_days(-1, today) == (None, None)


def test_the_span_of_a_range_is_the_range_asked() -> None:
    today = date(2026, 11, 23)
    days = ["2026-11-20", "2026-11-21"]
    assert span(date(2026, 10, 25), today, days, today) == ("2026-10-25", "2026-11-23")  # empty days kept
    assert span(None, None, days, today) == ("2026-11-20", "2026-11-23")  # open: first call … today
    assert span(None, None, ["2026-11-20", "2026-11-30"], today) == ("2026-11-20", "2026-11-30")  # dated later
    assert span(None, None, [], today) == (None, None)
    assert span(date(2026, 11, 1), None, [], today) == ("2026-11-01", "2026-11-23")
    assert span(date(2026, 12, 1), None, [], today) == (None, None)  # a range that starts after today: nothing


def _line(kind: str, payload: dict[str, Any], ts: str = "2026-03-01T10:00:00.000Z") -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n"


def _rollout(folder: Path, name: str, cwd: str, prompt: str, *, new: bool) -> None:
    """A Codex rollout of one call: as 0.169 writes it (``new``: no user_message event, the cwd in world_state
    only) or as older versions do."""
    usage = {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 5, "reasoning_output_tokens": 0,
             "total_tokens": 105}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}
    env = {"type": "message", "role": "user",
           "content": [{"type": "input_text", "text": f"<environment_context><cwd>{cwd}</cwd></environment_context>"}]}
    lines = [_line("session_meta", {"id": name, "cwd": "" if new else cwd, "timestamp": "2026-03-01T10:00:00Z"})]
    if new:
        lines.append(_line("world_state", {"state": {"environments": {"environments": {"local": {"cwd": cwd}}}}}))
    else:
        lines.append(_line("event_msg", {"type": "user_message", "message": prompt}))
    lines += [_line("turn_context", {"model": "gpt-5", "cwd": cwd if not new else ""}),
              _line("response_item", env), _line("response_item", user),
              _line("event_msg", {"type": "token_count", "info": {"total_token_usage": usage, "last_token_usage": usage,
                                                                  "model_context_window": 258400}})]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rollout-2026-03-01T10-00-00-{name}.jsonl").write_text("".join(lines))


def test_projects_are_folders_by_full_path_and_codex_sessions_are_titled_by_their_first_prompt(tmp_path: Path) -> None:
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2026" / "03" / "01"
    _rollout(day, "a", "/home/me/a/work", "fix the parser", new=True)
    _rollout(day, "b", "/home/me/b/work", "write the docs", new=True)
    _rollout(day, "c", "/home/me/b/work", "add a test", new=False)
    ix = UsageIndex(tmp_path / "usage")
    ix.update(home=home, env={})
    report = usage_report(ix)
    projects = {p["project"]: p["calls"] for p in report.projects}
    assert projects == {"/home/me/a/work": 1, "/home/me/b/work": 2}  # two folders named "work": two projects
    titles = {s["title"]: s["project"] for s in report.sessions}
    assert titles == {"fix the parser": "/home/me/a/work", "write the docs": "/home/me/b/work",
                      "add a test": "/home/me/b/work"}


def test_a_project_path_is_shown_short() -> None:
    from engine.usage.report import short_path

    assert short_path("/home/me/a/work", "/home/me") == "~/a/work"
    assert short_path("/home/me", "/home/me/") == "~"
    assert short_path("/home/meat/x", "/home/me") == "/home/meat/x"  # not under the home folder
    long = "/srv/builds/" + "/".join(f"level{i}" for i in range(10)) + "/work"
    shown = short_path(long, "/home/me", 30)
    assert shown.startswith("…/") and shown.endswith("/level9/work") and len(shown) <= 30
    assert short_path("/x/" + "a" * 60, "/h", 30) == "…/" + "a" * 60  # the last folder whole, however long
    assert short_path("", "/h") == "" and short_path("proj", "/h") == "proj"
