"""The executor measures, when the backward starts, exactly the bytes the simulator says the
schedule saves (``Timeline.saved_bytes``), at every saved-bytes limit, and says so."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import solver  # noqa: E402
from tests.solver.executors.test_sac_saved import MASK, TwoDropouts  # noqa: E402


class GeluMlp(torch.nn.Module):
    """Linear-GELU twice: the GELU's backward reads its input, the linear's output, so a
    schedule that keeps the GELU's input frees nothing SAC's cache would free."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (
            torch.nn.Linear(32, 128),
            torch.nn.Linear(128, 128),
            torch.nn.Linear(128, 4),
        )

    def forward(self, x):
        return self.c(torch.nn.functional.gelu(self.b(torch.nn.functional.gelu(self.a(x)))))


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_measured_saved_bytes_equal_the_prediction(share):
    torch.manual_seed(0)
    model = GeluMlp().train()
    imported = solver.import_model(model, (torch.randn(16, 32),), level="op")
    unlimited = imported.solve(gpu=None, cpu=None, method="checkmate:cpu", time_limit=20)
    most = unlimited.timeline.saved_bytes["cpu"]
    plan = imported.solve(
        gpu=None, cpu=None, method="checkmate:cpu", time_limit=20, saved={"cpu": int(share * most)}
    )
    report = plan.execute()
    assert report.gradients_match
    assert report.measured_saved["cpu"] == plan.timeline.saved_bytes["cpu"]
    assert report.predicted_saved["cpu"] == plan.timeline.saved_bytes["cpu"]
    assert report.measured_saved["cpu"] <= int(share * most)
    assert report.to_json()["measured"]["saved_bytes"]["cpu"] == report.measured_saved["cpu"]


def test_the_least_saved_plan_holds_only_the_masks_when_run():
    torch.manual_seed(0)
    model = TwoDropouts().train()
    imported = solver.import_model(model, (torch.randn(16, 64),), level="op")
    plan = imported.solve(gpu=None, method="checkmate:cpu", cpu=None, saved={"cpu": 2 * MASK})
    report = plan.execute()
    assert report.gradients_match
    assert report.measured_saved["cpu"] == 2 * MASK
