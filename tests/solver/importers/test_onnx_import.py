"""ONNX import gives the same graph as torch.fx for an exported network."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from importer_helpers import traced  # noqa: E402

from solver.document.graph import Graph  # noqa: E402
from solver.errors import GraphFormatError  # noqa: E402
from solver.importers.onnx_import import import_onnx, onnx_ops  # noqa: E402
from solver.importers.torch_fx import import_torch  # noqa: E402
from solver.importers.zoo_models import ZOO  # noqa: E402

CASES = {
    "resnet18": (2, 3, 32, 32),
    "mobilenetv2": (2, 3, 32, 32),  # ReLU6 = Clip with Constant bounds, depthwise convs
    "unet": (1, 3, 32, 32),  # ConvTranspose, Concat
    "transformer": (2, 16, 512),  # MatMul + bias Add, shape arithmetic, LayerNorm, Softmax
}


def export(name: str, path) -> None:
    """Weight-free training-mode export."""
    model = ZOO[name][0]().train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated, still works
        torch.onnx.export(
            model,
            (torch.randn(CASES[name]),),
            str(path),
            dynamo=False,
            export_params=False,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
        )


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    paths = {}
    for name in CASES:
        paths[name] = folder / f"{name}.onnx"
        export(name, paths[name])
    return paths


def summary(ops):
    return [
        (op.name, op.kind, op.inputs, op.shape, op.output_bytes, op.flops, op.params,
         op.extra_bytes, op.grad_bytes)
        for op in ops.ops
    ]  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_ops_equal_torch_fx_ops(exported, name):
    from_onnx = onnx_ops(exported[name])
    from_fx = traced(name, CASES[name])
    assert summary(from_onnx) == summary(from_fx)
    assert from_onnx.parameters == from_fx.parameters
    assert from_onnx.input_shape == CASES[name]


def test_onnx_file_is_weight_free(exported):
    assert exported["resnet18"].stat().st_size < 100_000  # 11.7 M parameters not embedded


@pytest.mark.parametrize("level", ["layer", "op"])
def test_import_onnx_training_graph_equals_import_torch(exported, level):
    from_onnx = import_onnx(exported["resnet18"], level=level)
    from_fx = import_torch(ZOO["resnet18"][0], CASES["resnet18"], level=level)
    assert graph_key(from_onnx) == graph_key(from_fx)
    assert from_onnx.n == (63 if level == "layer" else 137)


def graph_key(graph: Graph):
    nodes = [(n.id, n.kind, n.op, n.memory, dict(n.cost), n.flops) for n in graph.nodes]
    return nodes, sorted(graph.edge_pairs), graph.devices, graph.links


def test_onnx_ops_input_shape_rewrites_the_batch(exported):
    ops = onnx_ops(exported["resnet18"], input_shape=(8, 3, 32, 32))
    assert ops.op("conv1").shape == (8, 64, 16, 16)


def test_import_onnx_measured_costs_need_torch_module(exported):
    with pytest.raises(GraphFormatError, match="measured costs need a torch module"):
        import_onnx(exported["resnet18"], cost_model="measured")


def test_import_onnx_rejects_a_non_onnx_file(tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x00\x01not a protobuf" * 10)
    with pytest.raises(GraphFormatError, match="model.onnx"):
        import_onnx(bad)
    with pytest.raises(GraphFormatError, match="check the path"):
        import_onnx(tmp_path / "missing.onnx")
