"""The inspector under test: shown, 800×600, with three offloaded files."""

from __future__ import annotations

import pytest

from tests.widgets.inspector.data import FILES
from widgets.inspector import Inspector


@pytest.fixture
def ins(qtbot, tmp_path):
    w = Inspector()
    qtbot.addWidget(w)
    w.resize(800, 600)
    w.show()
    qtbot.waitExposed(w)
    w.set_session_dir(tmp_path)
    w.set_offloaded_files(FILES)
    return w
