"""widgets.chart_bar: the next request's bar on its own (header, bar, lines, legend; whole window or fitted)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtWidgets import QVBoxLayout, QWidget

from engine.model.snapshot import ContextSnapshot
from widgets.chart_bar import RequestBar
from widgets.theme import DARK, LIGHT, REGION_ORDER


def snap(**kw: object) -> ContextSnapshot:
    data: dict[str, object] = dict(
        window=1_000_000, max_tokens=10_000, system=1_000, summary=0, history_user=3_000,
        history_assistant=4_000, history_tool=5_000, tools=500, threshold_tokens=800_000,
        estimator="heuristic", accuracy="estimated", draft=0, model="claude-sonnet-4-5",
    )
    data.update(kw)
    return ContextSnapshot(**data)  # type: ignore[arg-type]


@pytest.fixture
def bar(qtbot):
    host = QWidget()
    qtbot.addWidget(host)
    made = RequestBar(QVBoxLayout(host), LIGHT)
    host.resize(420, 200)
    host.show()
    qtbot.waitExposed(host)
    yield made
    host.close()  # (held until the test ends: the bar's widgets are the host's children)


def test_the_header_bar_and_legend_added_in_that_order(bar: RequestBar) -> None:
    layout = bar.header.parentWidget().layout()
    assert [layout.itemAt(i).widget() for i in range(layout.count())] == [bar.header, bar.plot, bar.legend]


def test_nothing_yet_then_a_request_on_the_whole_window(bar: RequestBar) -> None:
    bar.show(None, None, False, LIGHT)
    assert bar.header.text() == "No request yet" and not bar.threshold_line.isVisible()
    assert all(width == 0 for _, width in bar.segments().values())
    s = snap()
    bar.show(s, 2_000, False, LIGHT)  # the draft replaced by 2,000 while typing
    seg = bar.segments()
    assert list(seg) == list(REGION_ORDER) and seg["draft"][1] == 2_000
    assert sum(width for _, width in seg.values()) == pytest.approx(1_000_000)
    (_, right), _ = bar.plot.getPlotItem().getViewBox().viewRange()
    assert right >= 1_000_000 and not bar.offscale.isVisible()
    assert "2,000 draft" in bar.header.text() and "window of claude-sonnet-4-5" in bar.header.text()
    assert bar.legend.row_text("limit") == "1,000,000 · 100.0%"


def test_a_window_observed_from_the_prompts_is_not_called_the_models(bar: RequestBar) -> None:
    """An imported session of a model with no known window (or before litellm is loaded) is drawn against the window
    its prompts showed: the header says so instead of naming it the model's."""
    bar.show(replace(snap(), window_source="observed", model="openai/gpt-4o"), None, False, LIGHT)
    text = bar.header.text()
    assert "window observed from the prompts (openai/gpt-4o)" in text and "window of" not in text


def test_fitted_the_bar_has_its_own_scale_and_names_the_lines_past_it(bar: RequestBar) -> None:
    s = snap()
    bar.show(s, None, True, LIGHT)
    used = s.prompt + s.reserve + s.draft
    (_, right), _ = bar.plot.getPlotItem().getViewBox().viewRange()
    assert right == pytest.approx(used * 1.05, rel=0.01)
    assert bar.offscale.isVisible()
    text = bar.offscale.textItem.toPlainText()
    assert "threshold 800k" in text and "window 1M" in text and text.endswith("→")


def test_over_the_threshold_then_over_the_window_said_in_the_header(bar: RequestBar) -> None:
    bar.show(snap(window=20_000, threshold_tokens=15_000, max_tokens=2_000), None, False, DARK)
    assert "over the compaction threshold" in bar.header.text()
    bar.show(snap(window=12_000, threshold_tokens=9_000, max_tokens=2_000), None, False, DARK)
    assert "over the window by" in bar.header.text() and DARK.error in bar.header.text()
