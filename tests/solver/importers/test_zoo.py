"""The bundled graphs load, validate, and are exactly what the generator writes today."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.document.graph_io import load_graph
from solver.importers.zoo import BUNDLED, file_stem, write_zoo
from solver.optimize.bounds import no_remat_peak

GRAPHS = Path(__file__).resolve().parents[3] / "resources" / "graphs"
EXPECTED_NODES = {
    "vgg16": 45, "vgg19": 51, "resnet18": 63, "resnet34": 111, "resnet50": 145, "unet": 63,
    "mobilenetv2": 129, "transformer": 23, "vgg16-op": 79, "resnet18-op": 137,
}  # fmt: skip


@pytest.mark.parametrize("stem", sorted(EXPECTED_NODES))
def test_bundled_graph_loads_and_validates(stem):
    graph = load_graph(GRAPHS / f"{stem}.graph.json")
    assert graph.n == EXPECTED_NODES[stem]
    assert graph.notes == ()  # already in topological order
    assert [d.name for d in graph.devices] == ["cpu", "gpu"]
    assert {(lk.source, lk.target) for lk in graph.links} == {("cpu", "gpu"), ("gpu", "cpu")}
    assert all(set(node.cost) == {"cpu", "gpu"} for node in graph.nodes)
    gpu = graph.device("gpu")
    assert (
        gpu.memory_limit
        == no_remat_peak(graph) + gpu.fixed_memory
        == (graph.meta["peak_no_remat"] + gpu.fixed_memory)
    )
    assert gpu.fixed_memory == 2 * 4 * graph.meta["parameters"]
    for key in ("source", "batch", "cost_model", "level", "memory", "generator"):
        assert key in graph.meta
    assert (GRAPHS / f"{stem}.graph.json").stat().st_size < 100_000


def test_bundled_graphs_are_up_to_date(tmp_path):
    pytest.importorskip("torch")
    written = write_zoo(tmp_path)
    assert sorted(p.name for p in written) == sorted(
        f"{file_stem(n, lvl)}.graph.json" for n, lvl in BUNDLED
    )
    for path in written:
        assert path.read_bytes() == (GRAPHS / path.name).read_bytes(), path.name
