"""Files: bad files are refused with the core's message and change nothing; projects round-trip.

The error dialog and the unsaved-changes question are monkeypatched classmethods (conftest).
"""

from __future__ import annotations

import json
import os

import pytest

from app.dialogs import Choice, FileDialog
from app.project import SolverSettings
from solver.document.examples import example_path
from solver.document.graph_io import graph_to_dict
from solver.document.json_io import read_json
from solver.document.schedule_io import save_schedule, schedule_to_dict


def chain_doc() -> dict:
    return read_json(example_path("chain"))


def malformed(tmp_path):
    path = tmp_path / "malformed.graph.json"
    path.write_text('{"format": "remat-graph", "nodes": [', encoding="utf-8")
    return path, "line 1"


def cycle(tmp_path):
    doc = chain_doc()
    doc["nodes"][0]["inputs"] = [doc["nodes"][-1]["id"]]
    path = tmp_path / "cycle.graph.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path, "cycle"


def unknown_device(tmp_path):
    doc = chain_doc()
    doc["nodes"][1]["cost"]["tpu"] = 1.0
    path = tmp_path / "device.graph.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path, "unknown device 'tpu'"


def negative_size(tmp_path):
    doc = chain_doc()
    doc["nodes"][2]["memory"] = -4
    path = tmp_path / "negative.graph.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path, "negative"


@pytest.mark.parametrize("bad", [malformed, cycle, unknown_device, negative_size])
def test_files_bad_file_shows_error_and_keeps_work(tmp_path, make_window, dialogs, bad):
    window = make_window("chain")
    window.devices_panel.rows["gpu"].slider.setValue(900)  # unsaved work
    graph, stack_count = window.document.graph, window.document.undo_stack.count()
    path, expected = bad(tmp_path)
    assert not window.open_file(str(path))
    ((title, message),) = dialogs.errors
    assert path.name in title and path.name in message and expected in message
    assert window.document.graph is graph
    assert window.document.undo_stack.count() == stack_count and window.document.is_modified
    assert dialogs.unsaved_asked == []  # refused before anything was asked


def test_files_save_and_reopen_round_trip(tmp_path, qtbot, make_window, monkeypatch):
    window = make_window("chain")
    window.document.edit_budget = None
    window.devices_panel.rows["gpu"].size_edit.setText("40 MB")
    window.devices_panel.rows["gpu"].size_edit.editingFinished.emit()
    settings = SolverSettings(method="xengine", backend="cbc", time_limit_s=30, gap_rel=0.001)
    window.document.set_settings(settings)
    with qtbot.waitSignal(window.controller.finished, timeout=60_000) as blocker:
        window.window_actions.solve.trigger()
    assert blocker.args[0].ok
    target = tmp_path / "study.xengine.json"
    monkeypatch.setattr(FileDialog, "save_path", classmethod(lambda cls, *a: str(target)))
    window.window_actions.save.trigger()
    assert target.is_file() and not window.document.is_modified
    assert window.windowTitle().startswith("study.xengine.json")

    again = make_window(None)
    assert again.open_file(str(target))
    old, new = window.document, again.document
    assert graph_to_dict(new.graph) == graph_to_dict(old.graph)
    assert new.memory_limits == old.memory_limits == {**old.memory_limits, "gpu": 40_000_000}
    assert new.settings == settings
    assert schedule_to_dict(new.result.schedule) == schedule_to_dict(old.result.schedule)
    assert new.result.ok and new.result.timeline.total_ms == pytest.approx(old.result.objective)
    assert new.file_path == str(target) and not new.is_modified
    assert str(target) in again.settings.recent_files()


def test_files_unsaved_prompt_cancel_keeps_everything(make_window, dialogs):
    window = make_window("chain")
    window.devices_panel.rows["gpu"].slider.setValue(900)
    graph = window.document.graph
    dialogs.unsaved_answer = Choice.CANCEL
    assert not window.open_example("diamond")
    assert dialogs.unsaved_asked == ["chain"]
    assert window.document.graph is graph and window.document.is_modified
    dialogs.unsaved_answer = Choice.DISCARD
    assert window.open_example("diamond")
    assert window.document.graph.name == "diamond" and not window.document.is_modified


def test_files_import_schedule_is_replayed(tmp_path, make_window, dialogs):
    window = make_window("chain")
    from solver.optimize.methods import solve

    result = solve(window.document.graph, "checkpoint-all:cpu")
    path = tmp_path / "mine.schedule.json"
    save_schedule(result.schedule, path)
    assert window.files.import_schedule(str(path))
    shown = window.document.result
    assert shown.ok and shown.timeline.total_ms == pytest.approx(result.timeline.total_ms)
    bad = tmp_path / "other.schedule.json"
    doc = schedule_to_dict(result.schedule)
    doc["stages"][0]["ops"][0]["node"] = "ghost"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    assert not window.files.import_schedule(str(bad))
    assert "unknown node 'ghost'" in dialogs.errors[-1][1]
    assert window.document.result is shown


# ----- the command line's FILE (issue 11) ------------------------------------------------------
def test_files_main_py_hands_file_to_run(monkeypatch, tmp_path):
    import app.main_window
    from main import main

    seen: list[list[str]] = []
    monkeypatch.setattr(app.main_window, "run", lambda argv: seen.append(argv) or 0)
    path = str(tmp_path / "net.graph.json")
    assert main([path]) == 0 and main([]) == 0
    assert seen == [[path], []]


def _graph_file(tmp_path, example: str = "diamond"):
    path = tmp_path / f"{example}-copy.graph.json"
    path.write_text(json.dumps(read_json(example_path(example))), encoding="utf-8")
    return path


def _close(window) -> None:
    window.document.undo_stack.setClean()
    window.close()
    window.deleteLater()


def test_files_run_opens_the_file_named_on_the_command_line(
    tmp_path, qtbot, monkeypatch, app_settings
):
    from PySide6.QtWidgets import QApplication

    import app.main_window as main_window
    import app.theme

    made = []
    real_create = main_window.create_window

    def create(path, settings=None):
        made.append(real_create(path, app_settings))
        return made[-1]

    monkeypatch.setattr(main_window, "create_window", create)
    monkeypatch.setattr(QApplication, "exec", lambda self: 0)  # never enter the event loop
    monkeypatch.setattr(app.theme, "apply_theme", lambda *a: None)  # keep the tests' palette
    path = _graph_file(tmp_path)
    try:
        assert main_window.run([str(path)]) == 0
        (window,) = made
        assert window.document.graph.name == "diamond"
        assert window.windowTitle().startswith("diamond")
        assert str(path) in app_settings.recent_files()
    finally:
        for window in made:
            _close(window)


def _deep(tmp_path):
    path = tmp_path / "deep.graph.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    return path, "nested more than 64 levels deep"


def _fifo(tmp_path):
    path = tmp_path / "pipe.graph.json"
    os.mkfifo(path)
    return path, "not a regular file"


def _nan(tmp_path):
    path = tmp_path / "nan.graph.json"
    path.write_text('{"format": "remat-graph", "nodes": [NaN]}', encoding="utf-8")
    return path, "NaN is not a JSON number"


def _missing(tmp_path):
    return tmp_path / "missing.graph.json", "No such file or directory"


@pytest.mark.parametrize("bad", [_deep, _fifo, _nan, _missing, lambda _: ("/dev/zero", "regular")])
def test_files_bad_file_on_the_command_line_opens_the_example(tmp_path, app_settings, dialogs, bad):
    from app.main_window import create_window

    path, words = bad(tmp_path)
    window = create_window(str(path), app_settings)
    try:
        assert window.document.graph.name == "chain"  # the bundled example, not a crash
        ((title, message),) = dialogs.errors
        assert title == f"Could not open {os.path.basename(path)}" and words in message
        assert window.statusBar().currentMessage() == (
            f"Could not open {path}; showing the bundled example chain"
        )
    finally:
        _close(window)


def test_files_unexpected_error_while_opening_is_shown_not_raised(
    tmp_path, app_settings, dialogs, monkeypatch
):
    import app.files
    from app.main_window import create_window

    real_load_any = app.files.load_any

    def broken(path):
        if "diamond" in str(path):
            raise RuntimeError("reader bug")
        return real_load_any(path)

    monkeypatch.setattr(app.files, "load_any", broken)
    window = create_window(str(_graph_file(tmp_path)), app_settings)
    try:
        assert window.document.graph.name == "chain"
        ((title, message),) = dialogs.errors
        assert title == "Could not open diamond-copy.graph.json"
        assert message == "unexpected error: RuntimeError('reader bug')"
    finally:
        _close(window)


# ----- saving through symlinks, refusing read-only files ---------------------------------------
def test_files_save_writes_through_a_symlink(tmp_path, make_window, monkeypatch):
    window = make_window("chain")
    real = tmp_path / "store" / "study.xengine.json"
    real.parent.mkdir()
    real.write_text("{}", encoding="utf-8")
    link = tmp_path / "study.xengine.json"
    link.symlink_to(real)
    monkeypatch.setattr(FileDialog, "save_path", classmethod(lambda cls, *a: str(link)))
    assert window.files.save_as()
    assert link.is_symlink() and read_json(real)["format"] == "xengine-project"
    assert sorted(p.name for p in real.parent.iterdir()) == ["study.xengine.json"]


def test_files_save_refuses_a_read_only_file(tmp_path, make_window, monkeypatch, dialogs):
    window = make_window("chain")
    window.devices_panel.rows["gpu"].slider.setValue(900)  # unsaved work
    target = tmp_path / "locked.xengine.json"
    target.write_text("keep", encoding="utf-8")
    target.chmod(0o444)
    monkeypatch.setattr(FileDialog, "save_path", classmethod(lambda cls, *a: str(target)))
    assert not window.files.save_as()
    ((title, message),) = dialogs.errors
    assert title == "Could not save locked.xengine.json"
    assert (
        message
        == f"{target}: the file is read-only; save under another name, or make it writable first"
    )
    assert target.read_text() == "keep" and window.document.is_modified
