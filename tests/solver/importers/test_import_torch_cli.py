"""``main.py import-torch``: files, stdout, exit codes and one-line errors."""

from __future__ import annotations

import json

import pytest

from solver.cli import main
from solver.document.graph_io import load_graph

SPEC = "solver.importers.zoo_models:ResNet18"


def test_import_torch_command_writes_a_loadable_file(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "r18.graph.json"
    argv = [SPEC, "--input", "4x3x64x64", "-o", str(out), "--level", "op", "--capture", "fx"]
    code = main(["import-torch", *argv])
    assert code == 0
    graph = load_graph(out)
    assert graph.n == 137
    assert graph.meta["input_shape"] == [4, 3, 64, 64]
    assert "137 nodes" in capsys.readouterr().err


def test_import_torch_command_prints_json_without_output(capsys):
    pytest.importorskip("torch")
    argv = [SPEC, "--input", "2x3x64x64", "--gpu", "v100-sxm2", "--capture", "fx"]
    assert main(["import-torch", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "remat-graph"
    assert len(doc["nodes"]) == 63
    assert "v100-sxm2" in doc["meta"]["cost_model"]["gpu"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nowhere.module:Net", "--input", "1x3x32x32"], "cannot import 'nowhere.module'"),
        ([SPEC, "--input", "2x5", "--capture", "fx"], "cannot trace the model"),
        ([SPEC, "--input", "2x5"], "cannot capture the training step: RuntimeError"),
    ],
)
def test_import_torch_command_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    pytest.importorskip("torch")
    assert main(["import-torch", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_import_torch_command_bad_shape_is_a_usage_error(capsys):
    assert main(["import-torch", SPEC, "--input", "32xfoo"]) == 2
    assert capsys.readouterr().err == (
        "main.py import-torch: error: argument --input: '32xfoo' is not a shape; write "
        "positive sizes joined by 'x', e.g. 32x3x224x224; see main.py import-torch --help\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: spec, --input"),
        ([SPEC], "the following arguments are required: --input"),
        ([SPEC, "--input", "2x3", "--bogus"], "unrecognized arguments: --bogus"),
        ([SPEC, "--input", "2x3", "--level", "block"], "argument --level: invalid choice"),
    ],
)
def test_import_torch_command_usage_errors_are_one_line(argv, message, capsys):
    """The CLI contract: exit 2 and one line naming the problem and --help, no usage block."""
    assert main(["import-torch", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("main.py import-torch: error: ") and message in err
    assert err.endswith("; see main.py import-torch --help\n") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv", [[], [SPEC, "--input", "2x3"], [SPEC, "--input", "2x3", "--schedule", "s", "--x"]]
)
def test_execute_command_usage_errors_are_one_line(argv, capsys):

    assert main(["execute", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("main.py execute: error: ") and err.count("\n") == 1


def test_import_torch_command_help_exits_0(capsys):
    assert main(["import-torch", "--help"]) == 0
    assert "--level" in capsys.readouterr().out
