"""Solve > Execute on PyTorch runs the shown schedule as a real training step (issue 9)."""

from __future__ import annotations

import pytest

from app.execute_action import DeviceMapDialog, ExecutionDialog, report_text
from solver.optimize.methods import solve


def test_execute_action_reports_measured_beside_predicted(qtbot, make_window, monkeypatch):
    pytest.importorskip("torch")
    window = make_window("attention-aten")
    action = window.execute_action
    assert not action.action.isEnabled()  # nothing solved yet
    window.document.set_result(solve(window.document.graph, "checkpoint-all:gpu"))
    assert action.action.isEnabled()
    asked, shown = [], []
    monkeypatch.setattr(
        DeviceMapDialog,
        "ask",
        classmethod(lambda cls, p, model, default: asked.append(default) or "gpu=cpu"),
    )
    monkeypatch.setattr(
        ExecutionDialog, "show_report", classmethod(lambda cls, p, text: shown.append(text))
    )
    action.action.trigger()
    assert asked == ["cpu=cpu,gpu=cpu"]
    assert not action.action.isEnabled()  # one run at a time
    qtbot.waitUntil(lambda: bool(shown), timeout=120_000)
    doc = action.last_report
    assert doc["gradients_match"] is True
    assert doc["measured"]["peak_bytes"]["gpu"] <= doc["budget_bytes"]["gpu"]
    assert shown == [report_text(doc)]
    assert shown[0].startswith("Gradients equal loss.backward(): yes")
    assert action.action.isEnabled()


def test_execute_action_refuses_a_graph_not_imported_from_pytorch(make_window, dialogs):
    window = make_window("chain")
    window.document.set_result(solve(window.document.graph, "checkpoint-all:cpu"))
    assert window.execute_action.start() is False
    assert "it was not imported from PyTorch's joint graph" in str(dialogs.errors[-1])
