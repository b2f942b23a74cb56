"""Dropout masks held as bool tensors (``dropout_masks="bool"``): a quarter of eager's float
masks, the same draws, so the step still equals ``loss.backward()``; measured by the
executor; no checkpointing policy (eager cannot hold them so)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import solver  # noqa: E402
from solver.errors import XEngineError  # noqa: E402
from tests.solver.executors.test_sac_saved import MASK, TwoDropouts  # noqa: E402


def imported(masks: str):
    torch.manual_seed(0)
    model = TwoDropouts().train()
    return model, solver.import_model(
        model, (torch.randn(16, 64),), level="op", dropout_masks=masks
    )


def test_bool_masks_hold_a_quarter_and_run_with_equal_gradients():
    _, plain = imported("float")
    _, lean = imported("bool")
    with pytest.raises(XEngineError, match="no schedule"):  # float masks: 4 bytes each
        plain.solve(gpu=None, cpu=None, method="checkmate:cpu", saved={"cpu": 2 * MASK - 1})
    with pytest.raises(XEngineError, match="no schedule"):
        lean.solve(gpu=None, cpu=None, method="checkmate:cpu", saved={"cpu": 2 * MASK // 4 - 1})
    plan = lean.solve(gpu=None, cpu=None, method="checkmate:cpu", saved={"cpu": 2 * MASK // 4})
    report = plan.execute()
    assert report.gradients_match
    assert report.measured_saved["cpu"] == plan.timeline.saved_bytes["cpu"] == 2 * MASK // 4
    unlimited = lean.solve(gpu=None, cpu=None, method="checkmate:cpu")
    full = unlimited.execute()
    assert full.gradients_match
    assert full.measured_peak["cpu"] == full.predicted_peak["cpu"]


def test_a_bool_mask_plan_exports_no_policy_and_says_why():
    _, lean = imported("bool")
    plan = lean.solve(gpu=None, cpu=None, method="checkmate:cpu")
    with pytest.raises(XEngineError, match="dropout masks as bool"):
        plan.policy_source()
    assert plan.graph.meta["dropout_masks"] == "bool"


def test_unknown_mask_kind_is_refused():
    with pytest.raises(XEngineError, match="use 'float' or 'bool'"):
        imported("half")
