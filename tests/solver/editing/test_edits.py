"""Pure graph and device edits: each returns a new valid graph or names what is wrong."""

from __future__ import annotations

import pytest

from solver.document.examples import example_path
from solver.document.generators import unit_chain
from solver.document.graph import Device, Node
from solver.document.graph_io import load_graph
from solver.editing import device_edits, edits
from solver.errors import GraphFormatError


def test_edits_empty_graph_has_two_linked_devices_and_no_nodes():
    graph = edits.empty_graph("sketch")
    assert graph.name == "sketch" and graph.n == 0
    assert {(lk.source, lk.target) for lk in graph.links} == {("cpu", "gpu"), ("gpu", "cpu")}


def test_edits_add_node_and_edge_then_remove_them():
    graph = edits.add_node(edits.empty_graph(), Node("a", 1, {"cpu": 1.0}))
    graph = edits.add_node(graph, Node(edits.next_node_id(graph), 2, {"cpu": 1.0}))
    assert [n.id for n in graph.nodes] == ["a", "n1"]
    graph = edits.add_edge(graph, "n1", "a")
    assert [n.id for n in graph.nodes] == ["n1", "a"]  # re-sorted into schedule order
    assert edits.remove_items(graph, (), [("n1", "a")]).edges == ()
    assert [n.id for n in edits.remove_items(graph, ["n1"]).nodes] == ["a"]


def test_edits_add_edge_refuses_duplicates_cycles_and_unknown_nodes():
    graph = unit_chain(1)
    with pytest.raises(GraphFormatError, match="edge n0 -> n1: the nodes are already connected"):
        edits.add_edge(graph, "n0", "n1")
    with pytest.raises(GraphFormatError, match="the edges form a cycle: n0 -> n1 -> n2 -> n0"):
        edits.add_edge(graph, "n2", "n0")
    with pytest.raises(GraphFormatError, match="delete: unknown node 'x'"):
        edits.remove_items(graph, ["x"])


def test_edits_set_node_fields_checks_values():
    graph = unit_chain(1)
    assert edits.set_node_fields(graph, "n1", memory=7, op="relu").node("n1").memory == 7
    with pytest.raises(GraphFormatError, match="node 'n1', field 'memory': -1 is negative"):
        edits.set_node_fields(graph, "n1", memory=-1)


def test_edits_set_link_keeps_its_place_and_creates_missing_ones():
    graph = device_edits.set_link(edits.empty_graph(), "gpu", "cpu", 1e9, 1.0)
    assert [(lk.source, lk.bandwidth) for lk in graph.links] == [("cpu", 12e9), ("gpu", 1e9)]
    three = device_edits.add_device(graph, Device("tpu", "tpu", 8))
    fewer = edits.rebuild(three, links=three.links[:2])
    assert device_edits.set_link(fewer, "tpu", "cpu", 5e9, 0.0).links[-1].target == "cpu"


def test_edits_rename_device_follows_costs_links_and_overrides():
    graph = edits.set_edge_transfer(
        load_graph(example_path("chain")), "fc1", "relu1", {"cpu->gpu": 2.0}
    )
    renamed = device_edits.rename_device(graph, "gpu", "tpu")
    assert [d.name for d in renamed.devices] == ["cpu", "tpu"]
    assert {lk.target for lk in renamed.links} == {"cpu", "tpu"}
    assert renamed.node("fc1").cost == {"cpu": 4.0, "tpu": 0.5}
    assert next(e for e in renamed.edges if e.source == "fc1").transfer_ms == {"cpu->tpu": 2.0}
    with pytest.raises(GraphFormatError, match="duplicate device name"):
        device_edits.rename_device(graph, "gpu", "cpu")


def test_edits_remove_last_device_of_a_node_is_refused():
    graph = unit_chain(2, budget=10)
    with pytest.raises(GraphFormatError, match="node 'n0', field 'cost': no device can run it"):
        device_edits.remove_device(graph, "cpu")
    two = device_edits.add_device(graph, Device("gpu", "gpu", 8))
    assert two.node("n0").cost == {"cpu": 1.0, "gpu": 1.0}
    assert len(device_edits.remove_device(two, "gpu").links) == 0


class TestRenameNode:
    def test_rename_node_updates_edges_inputs_and_of_and_keeps_order(self):
        graph = load_graph(example_path("chain"))
        renamed = edits.rename_node(graph, "fc3", "dense3")
        assert [n.id for n in renamed.nodes] == [
            "dense3" if n.id == "fc3" else n.id for n in graph.nodes
        ]
        assert renamed.node("fc3.grad").of == "dense3"
        assert ("relu2", "dense3") in {(e.source, e.target) for e in renamed.edges}
        k = renamed.index["loss"]
        assert [renamed.nodes[i].id for i in renamed.inputs[k]] == ["dense3"]
        assert renamed.edge_pairs == graph.edge_pairs
        assert renamed.node("dense3").cost == graph.node("fc3").cost

    def test_rename_node_keeps_edge_overrides(self):
        graph = edits.set_edge_transfer(
            load_graph(example_path("chain")), "fc1", "relu1", {"cpu->gpu": 2.0}
        )
        renamed = edits.rename_node(graph, "relu1", "act1")
        assert renamed.transfer_ms("fc1", "act1", "cpu", "gpu") == 2.0

    def test_rename_node_to_same_id_returns_the_graph(self):
        graph = unit_chain(1)
        assert edits.rename_node(graph, "n1", "n1") is graph

    @pytest.mark.parametrize(
        ("old", "new", "message"),
        [
            ("n1", "n2", "node 'n1': id 'n2' is already taken; node ids must be unique"),
            ("n1", " ", "node 'n1': empty node id; give the node an id"),
            ("x", "y", "rename: unknown node 'x'"),
        ],
    )
    def test_rename_node_refuses_bad_ids(self, old, new, message):
        with pytest.raises(GraphFormatError, match=message):
            edits.rename_node(unit_chain(1), old, new)


class TestSetGraphName:
    def test_set_graph_name_keeps_everything_else(self):
        graph = load_graph(example_path("chain"))
        renamed = edits.set_graph_name(graph, "my chain")
        assert renamed.name == "my chain"
        assert renamed.nodes == graph.nodes and renamed.edges == graph.edges
        assert renamed.meta == graph.meta and renamed.links == graph.links

    def test_set_graph_name_refuses_an_empty_name(self):
        with pytest.raises(GraphFormatError, match="graph: empty graph name"):
            edits.set_graph_name(unit_chain(1), "  ")
