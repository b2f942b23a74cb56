"""Cycles of a grouping are merged: an import is always a DAG, and the merged node still runs."""

from __future__ import annotations

import pytest

from solver.importers.aten_condense import condense_cycles, schedule_order


def test_condense_merges_each_cycle_into_one_named_group():
    # a.grad <-> b.grad read each other (interleaved ops), c.grad is outside the cycle
    reads = {
        "a": set(),
        "loss": {"a"},
        "a.grad": {"loss", "b.grad"},
        "b.grad": {"a.grad", "a"},
        "c.grad": {"b.grad"},
    }
    order = ["a", "loss", "a.grad", "b.grad", "c.grad"]
    condensed = condense_cycles(reads, order)
    assert condensed.rename == {"a.grad": "a+1.grad", "b.grad": "a+1.grad"}
    assert condensed.of == {"a+1.grad": "a"}  # a backward node of an existing forward node


def test_condense_keeps_a_dag_as_it_is():
    reads = {"a": set(), "loss": {"a"}, "a.grad": {"loss", "a"}}
    condensed = condense_cycles(reads, list(reads))
    assert not condensed and condensed.rename == {} and condensed.of == {}


def test_condense_a_cycle_through_the_loss_is_the_loss():
    reads = {"a": set(), "loss": {"a", "b.grad"}, "b.grad": {"loss"}, "a.grad": {"b.grad"}}
    condensed = condense_cycles(reads, ["a", "loss", "b.grad", "a.grad"])
    assert condensed.rename == {"loss": "loss", "b.grad": "loss"}


def test_condense_names_never_collide():
    reads = {"x.grad": {"y.grad"}, "y.grad": {"x.grad"}}
    condensed = condense_cycles(reads, ["x.grad", "y.grad"], taken=["x+1.grad"])
    assert condensed.rename["x.grad"] == "x+1#2.grad"


def test_schedule_order_moves_a_node_after_what_it_reads_and_keeps_the_rest():
    # c must wait for b, listed after it; d, ready as early, keeps its place after c
    order = ["a", "c", "b", "d"]
    reads = {"a": set(), "c": {"b"}, "b": {"a"}, "d": {"a"}}
    assert schedule_order(order, reads) == ["a", "b", "c", "d"]


def test_a_forced_cycle_is_condensed_and_the_import_still_executes(monkeypatch):
    """Interleave two layers' backward ops on purpose (every other op to the other group,
    starting with a): the groups read each other; the plan merges them, the graph is a DAG,
    and a schedule of it runs with gradients equal to torch's."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from solver.executors.aten_runtime import execute_schedule
    from solver.importers import aten_groups
    from solver.importers.aten import capture_model, graph_from_plan
    from solver.importers.hardware import make_platform
    from solver.optimize.methods import solve

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    real_assign = aten_groups._assign

    def interleaved(nodes, owned, base, forward_group):
        owner = real_assign(nodes, owned, base, forward_group)
        backward = [n.name for n in owned if owner[n.name] in ("a.grad", "b.grad")]
        for j, name in enumerate(backward):
            owner[name] = ("a.grad", "b.grad")[j % 2]
        return owner

    monkeypatch.setattr(aten_groups, "_assign", interleaved)
    plan = aten_groups.plan_groups(capture_model(Mlp, (4, 8)), "layer")
    ids = [g.id for g in plan.groups]
    assert "a+1.grad" in ids and "a.grad" not in ids and "b.grad" not in ids
    assert plan.group("a+1.grad").of == "a"  # named after the group of the first op
    graph = graph_from_plan(plan, make_platform())  # make_graph refuses a cycle
    result = solve(graph, "chen-greedy:gpu")
    assert result.schedule is not None
    report = execute_schedule(plan, graph, result.schedule, {"gpu": "cpu"})
    assert report.gradients_match, report.max_abs_error


def test_a_read_before_an_in_place_write_runs_in_the_writers_node():
    """``c = y.clone(); y.sigmoid_()``: at op level the clone would be a node of its own,
    run after y's node, in-place write included, and copy the sigmoid; it joins y's node,
    so a schedule computes what the capture did (gradients equal torch's)."""
    pytest.importorskip("torch")
    from torch import nn

    from solver.executors.aten_runtime import execute_schedule
    from solver.importers.aten import capture_model, graph_from_plan
    from solver.importers.aten_groups import plan_groups
    from solver.importers.hardware import make_platform
    from solver.optimize.methods import solve

    class ReadThenWrite(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 2)

        def forward(self, x):
            y = self.a(x)
            c = y.clone()
            y.sigmoid_()
            return self.b(c * y)

    plan = plan_groups(capture_model(ReadThenWrite, (3, 6)), "op")
    nodes = {n.name: n for n in plan.capture.gm.graph.nodes}
    clone = next(n for n in nodes if str(nodes[n].target) == "aten.clone.default")
    sigmoid = next(n for n in nodes if str(nodes[n].target) == "aten.sigmoid_.default")
    assert plan.owner[clone] == plan.owner[sigmoid] == "a.addmm"  # else the gradients differ
    graph = graph_from_plan(plan, make_platform())
    result = solve(graph, "greedy")
    report = execute_schedule(plan, graph, result.schedule, {"gpu": "cpu"})
    assert report.gradients_match, report.max_abs_error
