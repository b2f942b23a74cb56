"""The ATen importer marks random nodes computed once: exactly the ops the checkpointing
policy always saves (dropout's mask: ``empty_like``, ``bernoulli_``, ``div_``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from solver.executors.sac_policy import forward_ops, random_positions, storage_owners  # noqa: E402
from solver.importers.aten import capture_model, graph_from_plan  # noqa: E402
from solver.importers.aten_groups import plan_groups, random_groups  # noqa: E402
from solver.importers.hardware import make_platform  # noqa: E402
from solver.importers.zoo_composite import COMPOSITE  # noqa: E402

SHAPE = (2, 16, 64)


def encoder(level: str):
    plan = plan_groups(capture_model(COMPOSITE["encoder"][0], SHAPE, name="encoder"), level)
    return plan, graph_from_plan(plan, make_platform())


class NoDropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_op_level_marks_the_dropout_masks_alone():
    plan, graph = encoder("op")
    once = [node for node in graph.nodes if not node.recomputable]
    # four layers of nn.TransformerEncoderLayer, each with four dropouts (the attention
    # weights', dropout1, dropout, dropout2)
    assert len(once) == 16 and all(node.kind == "forward" for node in once)
    targets = {n.name: str(n.target) for n in plan.capture.gm.graph.nodes}
    for node in once:
        assert {targets[op] for op in plan.group(node.id).ops} == {
            "aten.empty_like.default",
            "aten.bernoulli_.float",
            "aten.div_.Scalar",
        }
    masks = [node for node in graph.nodes if node.id.split(".")[-1].startswith("mul")]
    assert masks and all(node.recomputable for node in masks)  # x * mask is recomputable


@pytest.mark.parametrize("level", ["op", "layer"])
def test_marked_nodes_are_the_owners_of_what_the_policy_saves(level):
    plan, graph = encoder(level)
    owners = storage_owners(plan)
    ops = forward_ops(plan)
    saved = {
        owner if owner is not None else owners[i]
        for i, (_, owner) in enumerate(ops)
        if i in random_positions(plan)
    }
    assert saved and saved == random_groups(plan)
    assert {node.id for node in graph.nodes if not node.recomputable} == saved
    assert graph.once == tuple(graph.index[i] for i in sorted(saved, key=graph.index.get))


def test_a_model_without_random_ops_marks_nothing():
    capture = capture_model(NoDropout, (4, 64), name="plain")
    graph = graph_from_plan(plan_groups(capture, "op"), make_platform())
    assert graph.once == ()
