"""``main.py import-onnx``: the file it writes equals the library's import; one-line errors."""

from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from solver.cli import main  # noqa: E402
from solver.document.graph_io import graph_to_dict, load_graph  # noqa: E402
from solver.importers.hardware import make_platform  # noqa: E402
from solver.importers.onnx_import import import_onnx  # noqa: E402


class Small(torch.nn.Module):
    """Conv, BN, ReLU, pool, linear: enough for forward and backward nodes of each kind."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 5, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(5)
        self.fc = torch.nn.Linear(5, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


@pytest.fixture(scope="module")
def small_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "small.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated, still works
        torch.onnx.export(
            Small().train(),
            (torch.randn(2, 3, 9, 9),),
            str(path),
            dynamo=False,
            export_params=False,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
        )
    return path


def test_import_onnx_writes_the_librarys_graph(small_onnx, tmp_path, capsys):
    out = tmp_path / "small.graph.json"
    argv = ["import-onnx", str(small_onnx), "--input", "6x3x9x9", "--gpu", "v100-sxm2"]
    assert main([*argv, "-o", str(out)]) == 0
    expected = import_onnx(
        small_onnx,
        devices=make_platform({"cpu": "ryzen-9-7950x", "gpu": "v100-sxm2"}, "pcie4-x16"),
        input_shape=(6, 3, 9, 9),
    )
    assert graph_to_dict(load_graph(out)) == graph_to_dict(expected)
    assert load_graph(out).meta["input_shape"] == [6, 3, 9, 9]
    assert capsys.readouterr().err == f"{out}: {expected.n} nodes, {len(expected.edges)} edges\n"


def test_import_onnx_prints_json_without_output(small_onnx, capsys):
    assert main(["import-onnx", str(small_onnx), "--level", "op"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "remat-graph"
    assert {node["id"] for node in doc["nodes"]} >= {"loss", "conv", "conv.grad"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.onnx"], "error: missing.onnx: No such file or directory; check the path\n"),
        (
            ["{here}"],
            "error: {here}: not an ONNX model (or an empty graph); export it with "
            "torch.onnx.export or onnx.save\n",
        ),  # fmt: skip
        (
            ["{onnx}", "--input", "2x3"],
            "error: {onnx}: input 'input.1': input has 4 dimensions, "
            "not 2; give a shape of the right rank\n",
        ),  # fmt: skip
        (
            ["{onnx}", "--input", "2xthree"],
            "main.py import-onnx: error: argument --input: "
            "'2xthree' is not a shape; write positive sizes joined by 'x', e.g. 32x3x224x224; "
            "see main.py import-onnx --help\n",
        ),  # fmt: skip
    ],
)
def test_import_onnx_bad_input_is_one_line_and_exit_2(small_onnx, argv, message, capsys):
    names = {"here": __file__, "onnx": str(small_onnx)}
    assert main(["import-onnx", *(a.format(**names) for a in argv)]) == 2
    assert capsys.readouterr().err == message.format(**names)
