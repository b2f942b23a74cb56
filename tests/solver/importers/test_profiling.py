"""Measured per-op costs on this CPU add up to a real training step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from solver.importers.costmodel import LOSS_KEY, MeasuredCpuCostModel  # noqa: E402
from solver.importers.profiling import profile_ops, time_training_step  # noqa: E402
from solver.importers.torch_fx import import_torch, trace_ops  # noqa: E402


class TinyNet(nn.Module):
    """Conv-BN-ReLU x3, a max-pool, a residual add, dropout and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(3, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU()
        self.conv2, self.bn2, self.relu2 = nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv3, self.bn3, self.relu3 = nn.Conv2d(64, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU()
        self.head, self.drop, self.fc = nn.AdaptiveAvgPool2d(1), nn.Dropout(0.1), nn.Linear(64, 10)

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.pool(self.relu2(self.bn2(self.conv2(x))))
        x = x + self.relu3(self.bn3(self.conv3(x)))
        return self.fc(self.drop(torch.flatten(self.head(x), 1)))


SHAPE = (1, 3, 32, 32)


def test_profile_ops_sum_is_close_to_a_real_training_step():
    ops = trace_ops(TinyNet, SHAPE, name="tiny")
    ratios = []
    for _attempt in range(5):  # other processes on a shared 2-core machine skew single runs
        times = profile_ops(ops, warmup=2, repeats=7)
        per_op = sum(t.forward_ms + t.backward_ms for name, t in times.items() if name != LOSS_KEY)
        _, step = time_training_step(ops, warmup=2, repeats=7)
        ratios.append(per_op / step)
        if per_op == pytest.approx(step, rel=0.2):
            break
    assert min(ratios, key=lambda r: abs(r - 1)) == pytest.approx(1.0, rel=0.2), ratios
    assert set(times) == {op.name for op in ops.ops} | {LOSS_KEY}


def test_profile_ops_backward_ratio_differs_by_op():
    ops = trace_ops(TinyNet, (8, 3, 32, 32), name="tiny")
    times = profile_ops(ops, warmup=1, repeats=3)
    conv, pool = times["conv2"], times["pool"]
    assert conv.backward_ms > conv.forward_ms  # two products: grad input and grad weight
    assert pool.backward_ms / pool.forward_ms != pytest.approx(
        conv.backward_ms / conv.forward_ms, rel=0.2
    )


def test_import_torch_measured_reports_progress():
    seen = []
    model = MeasuredCpuCostModel(repeats=1, on_progress=lambda *a: seen.append(a))
    graph = import_torch(TinyNet, SHAPE, level="op", cost_model={"cpu": model})
    assert [done for done, _, _ in seen] == list(range(1, 15))
    assert seen[-1][1] == 14  # 3 x (conv, bn, relu) + pool + add + avgpool + dropout + fc
    assert "measured on the local CPU" in graph.meta["cost_model"]["cpu"]
    assert "roofline rtx-3090" in graph.meta["cost_model"]["gpu"]
    assert all(node.cost["cpu"] >= 0 for node in graph.nodes)
    assert graph.node("conv2.grad").cost["cpu"] > 0
