"""What the window remembers (QSettings, typed, never pickled) and auto-solve with its cache."""

from __future__ import annotations

from PySide6.QtCore import QByteArray

from app.commands import SetMemoryLimitCommand
from app.project import SolverSettings
from app.settings import MAX_RECENT, AppSettings


def test_settings_solver_choices_and_layout_survive_a_restart(make_window, app_settings):
    window = make_window("chain")
    chosen = SolverSettings("checkmate:gpu", "cbc", 42.0, 0.05, False)
    window.document.set_settings(chosen)
    window.docks["inspector"].raise_()
    window.close()
    raw = app_settings.qsettings
    assert raw.value("solver/time_limit_s", type=float) == 42.0  # typed reads, not pickles
    geometry, state = AppSettings().window_state()
    assert isinstance(geometry, QByteArray) and isinstance(state, QByteArray)
    again = make_window("chain")
    assert again.document.settings == chosen
    assert again.solver_panel.method_box.currentData() == "checkmate:gpu"
    assert again.solver_panel.time_limit_box.value() == 42.0


def test_settings_recent_files_are_a_capped_typed_list(app_settings, tmp_path):
    for i in range(MAX_RECENT + 3):
        app_settings.add_recent_file(str(tmp_path / f"p{i}.xengine.json"))
    recent = app_settings.recent_files()
    assert len(recent) == MAX_RECENT and recent[0].endswith(f"p{MAX_RECENT + 2}.xengine.json")
    app_settings.add_recent_file(recent[-1])
    assert app_settings.recent_files()[0] == recent[-1]


def test_auto_solve_runs_when_a_budget_settles_and_reuses_the_cache(qtbot, make_window):
    window = make_window("chain")
    window.document.set_settings(SolverSettings(auto_solve=True, time_limit_s=30))
    with qtbot.waitSignal(window.controller.finished, timeout=60_000) as first:
        window.document.edit(SetMemoryLimitCommand, "gpu", 40_000_000)
    assert first.args[0].schedule.memory_limits["gpu"] == 40_000_000
    with qtbot.waitSignal(window.controller.finished, timeout=60_000):
        window.document.edit(SetMemoryLimitCommand, "gpu", 36_000_000)
    window.window_actions.undo.trigger()  # back to 40 MB: solved before, shown at once
    assert window.document.result is first.args[0]
    assert not window.controller.is_running
