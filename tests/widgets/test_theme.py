from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette

from engine.model.text import format_bytes
from widgets.theme import (
    DARK,
    LIGHT,
    REGION_LABELS,
    REGION_ORDER,
    ThemeWatcher,
    apply_theme,
    format_tokens,
    palette,
    percent,
)


@pytest.fixture
def restore_theme(qapp):
    yield
    apply_theme(qapp, "system")


def _distance(a: str, b: str) -> float:
    ca, cb = QColor(a), QColor(b)
    return ((ca.red() - cb.red()) ** 2 + (ca.green() - cb.green()) ** 2 + (ca.blue() - cb.blue()) ** 2) ** 0.5


@pytest.mark.parametrize("pal", [LIGHT, DARK], ids=["light", "dark"])
def test_every_region_has_a_distinct_colour(pal):
    assert set(pal.regions) == set(REGION_ORDER) == set(REGION_LABELS)
    colours = [pal.regions[k] for k in REGION_ORDER]
    for i, a in enumerate(colours):
        for b in colours[i + 1 :]:
            assert _distance(a, b) > 40, (a, b)


@pytest.mark.parametrize("pal", [LIGHT, DARK], ids=["light", "dark"])
def test_text_contrasts_with_background(pal):
    text = QColor(pal.text).lightness()
    bg = QColor(pal.background).lightness()
    assert abs(text - bg) > 150
    # the free region must stand out from the chart background, and lines from the free region
    assert _distance(pal.regions["free"], pal.background) > 15
    assert _distance(pal.threshold, pal.regions["free"]) > 100
    assert _distance(pal.limit, pal.regions["free"]) > 100


def test_palette_modes(qapp):
    assert palette("light") is LIGHT
    assert palette("dark") is DARK
    assert palette("system") in (LIGHT, DARK)
    with pytest.raises(ValueError, match="theme must be one of"):
        palette("purple")


def test_apply_theme_forces_and_restores_scheme(qapp, restore_theme):
    pal = apply_theme(qapp, "dark")
    assert pal is DARK
    # platforms with a colour-scheme hint take the request; offscreen has none and keeps Unknown
    assert qapp.styleHints().colorScheme() in (Qt.ColorScheme.Dark, Qt.ColorScheme.Unknown)
    assert qapp.palette().color(QPalette.ColorRole.Window).lightness() < 100
    assert palette("system") is DARK  # "system" now reads the (forced) scheme
    pal = apply_theme(qapp, "light")
    assert pal is LIGHT
    assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 150
    assert palette("system") is LIGHT
    with pytest.raises(ValueError):
        apply_theme(qapp, "sepia")


def test_watcher_follows_the_system_scheme(qapp, qtbot, restore_theme):
    watcher = ThemeWatcher("system")
    seen = []
    watcher.changed.connect(seen.append)
    apply_theme(qapp, "dark")  # scheme hint and/or application palette change
    qtbot.waitUntil(lambda: bool(seen), timeout=2000)
    assert seen[-1] is DARK
    n = len(seen)
    apply_theme(qapp, "dark")  # nothing changed: no signal
    QGuiApplication.processEvents()
    assert len(seen) == n
    watcher.set_mode("light")
    assert seen[-1] is LIGHT
    count = len(seen)
    apply_theme(qapp, "system")
    QGuiApplication.processEvents()
    # a forced mode ignores system changes
    assert len(seen) == count
    watcher.set_mode("system")
    assert seen[-1] is palette("system")


def test_formatting():
    assert format_tokens(1234567) == "1,234,567"
    assert format_tokens(None) == "—"
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 1024 + 512) == "3.5 KB"
    assert format_bytes(5 * 1024 * 1024) == "5.0 MB"
    assert percent(1, 4) == "25.0%"
    assert percent(1, 0) == "—"
