"""Attention is computed once only when it draws: ATen tags the CPU's flash attention
``nondeterministic_seeded`` whatever its ``dropout_p``; with ``dropout_p`` 0 it is as
deterministic as a matmul, so its node may be recomputed (and the schedule runs with the
gradients of ``loss.backward()``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import solver  # noqa: E402


class Attention(torch.nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 9, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.p)
        return self.out(y.transpose(1, 2).reshape(2, 9, 16))


def attention_nodes(graph):
    return [n for n in graph.nodes if "attention" in n.id and n.kind == "forward"]


def test_attention_without_dropout_is_recomputable_and_with_dropout_its_mask_is_held():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 16)
    plain = solver.import_model(Attention(0.0).train(), (x,), level="op").graph
    assert attention_nodes(plain)  # the CPU's flash attention, tagged seeded
    assert plain.once == ()
    dropping = solver.import_model(Attention(0.25).train(), (x,), level="op").graph
    assert dropping.once  # the math path's dropout mask: drawn, so computed once


def test_deterministic_attention_recomputed_runs_with_equal_gradients():
    torch.manual_seed(0)
    imported = solver.import_model(Attention(0.0).train(), (torch.randn(2, 9, 16),), level="op")
    plan = imported.solve(gpu=None, cpu=None, method="checkmate:cpu", saved={"cpu": 0})
    ids = {n.id for n in attention_nodes(imported.graph)}
    assert any(op.node in ids for t, op in plan.schedule.operations if t >= plan.graph.boundary)
    report = plan.execute()
    assert report.gradients_match
    assert report.measured_saved["cpu"] == plan.timeline.saved_bytes["cpu"] == 0
