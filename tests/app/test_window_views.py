"""The window builds every view it names.

A view that fails to import is an error, not a silently lost tab.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.main_window import CENTRAL_VIEWS

ROOT = Path(__file__).resolve().parents[2]


def test_window_has_every_schedule_tab_the_stepper_and_its_menu(make_window):
    window = make_window()
    titles = [window.schedule_tabs.tabText(i) for i in range(window.schedule_tabs.count())]
    assert titles == [
        "Schedule",
        "Memory per tensor",
        "R / S matrices",
        "Comparison",
        "Trade-off explorer",
    ]
    for i, (view_class, _) in enumerate(CENTRAL_VIEWS):
        assert type(window.schedule_tabs.widget(i)) is view_class
    assert window.docks["stepper"].widget() is window.stepper
    menus = [a.text() for a in window.menuBar().actions()]
    assert "S&tep" in menus


def test_a_view_that_fails_to_import_stops_the_window_import():
    code = (
        "import sys\n"
        "sys.modules['app.views.matrices'] = None\n"  # as if the module had a typo
        "import app.main_window\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "ModuleNotFoundError: import of app.views.matrices halted" in done.stderr
