"""``import-torch --input SHAPE[:DTYPE]``, repeated: integer inputs, several inputs, tuples out."""

from __future__ import annotations

import json
import textwrap

import pytest

from solver.cli import main
from solver.cli.import_torch import parse_input
from solver.document.graph_io import load_graph
from solver.importers.aten_capture import InputSpec, inputs_from_meta

MODELS = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Tokens(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16)
            self.fc = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(self.emb(x).mean(1))

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = nn.Transformer(16, 2, 1, 1, 32, batch_first=True)

        def forward(self, src, tgt):
            return self.t(src, tgt)
    """
)


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "user_models.py"
    path.write_text(MODELS)
    return str(path)


def test_parse_input_reads_a_dtype_and_its_aliases():
    assert parse_input("4x12:int64") == InputSpec((4, 12), "int64")
    assert parse_input("4x12:long") == InputSpec((4, 12), "int64")
    assert parse_input("4x12:torch.half") == InputSpec((4, 12), "float16")
    assert parse_input("2x3x4") == InputSpec((2, 3, 4))
    assert str(InputSpec((4, 12), "int64")) == "4x12:int64" and str(InputSpec((2, 3))) == "2x3"


def test_import_torch_unknown_dtype_is_one_line_naming_the_fix(capsys):
    assert main(["import-torch", "m:C", "--input", "4x12:long64"]) == 2
    assert capsys.readouterr().err == (
        "main.py import-torch: error: argument --input: '4x12:long64' has an unknown dtype "
        "'long64'; write SHAPE:DTYPE with DTYPE one of bfloat16, bool, float16, float32, "
        "float64, int16, int32, int64, int8, uint8, e.g. 4x12:int64; "
        "see main.py import-torch --help\n"
    )


def test_import_torch_fx_capture_refuses_a_dtype(capsys):
    assert main(["import-torch", "m:C", "--input", "4x12:int64", "--capture", "fx"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--capture fx takes one float input" in err


def test_import_torch_embedding_on_int64_tokens(models, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "tokens.graph.json"
    assert main(["import-torch", f"{models}:Tokens", "--input", "4x12:int64", "-o", str(out)]) == 0
    graph = load_graph(out)
    assert graph.meta["inputs"] == [{"shape": [4, 12], "dtype": "int64"}]
    assert graph.meta["input_shape"] == [4, 12]
    assert inputs_from_meta(graph.meta) == (InputSpec((4, 12), "int64"),)
    # parameters and their gradients are the fixed memory: (50*16 + 16*3 + 3) floats, twice
    assert graph.device("gpu").fixed_memory == 2 * 4 * (50 * 16 + 16 * 3 + 3)
    assert {"emb", "fc", "loss", "fc.grad", "emb.grad"} <= {n.id for n in graph.nodes}


def test_import_torch_float_tokens_say_to_give_the_dtype(models, capsys):
    pytest.importorskip("torch")
    assert main(["import-torch", f"{models}:Tokens", "--input", "4x12"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.rstrip().endswith("give integer inputs (token ids) their dtype: --input 4x12:int64")


def test_import_torch_two_inputs_for_a_transformer(models, capsys):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from solver.importers.aten_capture import example_inputs
    from solver.importers.torch_fx import load_factory

    argv = [f"{models}:Pair", "--input", "2x6x16", "--input", "2x4x16", "--level", "op"]
    assert main(["import-torch", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    inputs = (InputSpec((2, 6, 16)), InputSpec((2, 4, 16)))
    assert inputs_from_meta(doc["meta"]) == inputs
    torch.manual_seed(0)
    model = load_factory(f"{models}:Pair")().train()
    with FlopCounterMode(display=False) as counter:
        model(*example_inputs(torch, inputs))
    assert doc["meta"]["forward_flops"] == counter.get_total_flops() > 0


def test_several_inputs_and_one_float_input_in_the_meta(models):
    """Several inputs are listed in the meta; a bare shape keeps the meta of graphs imported
    before dtypes (no ``inputs`` key)."""
    pytest.importorskip("torch")
    from solver.importers.aten import import_aten
    from solver.importers.torch_fx import load_factory

    graph = import_aten(f"{models}:Pair", [InputSpec((2, 6, 16)), InputSpec((2, 6, 16))])
    assert len(graph.meta["inputs"]) == 2
    # the fixed memory is the parameters (after both inputs) and their gradients
    parameters = sum(p.numel() for p in load_factory(f"{models}:Pair")().parameters())
    assert graph.device("gpu").fixed_memory == 2 * 4 * parameters
    single = import_aten("solver.importers.zoo_composite:SdpaNet", (1, 8, 128))
    assert "inputs" not in single.meta
    assert inputs_from_meta(single.meta) == (InputSpec((1, 8, 128)),)


def test_example_inputs_draw_valid_token_ids_and_randn_floats():
    torch = pytest.importorskip("torch")
    from solver.importers.aten_capture import example_inputs

    torch.manual_seed(3)
    floats, tokens = example_inputs(torch, [InputSpec((3, 4)), InputSpec((200,), "int64")])
    torch.manual_seed(3)
    assert torch.equal(floats, torch.randn(3, 4))  # what the executor draws for one input
    assert tokens.dtype == torch.int64 and set(tokens.tolist()) == {0, 1}


def test_loss_of_a_tuple_is_the_sum_over_its_float_outputs():
    torch = pytest.importorskip("torch")
    from solver.importers.aten_capture import loss_of

    a, b = torch.tensor([1.0, 3.0]), torch.tensor([[2.0]])
    assert float(loss_of((a, {"h": b, "ids": torch.tensor([7])}))) == 5.0 + 4.0
    with pytest.raises(TypeError, match="returned tuple without a floating-point tensor"):
        loss_of((torch.tensor([1]),))


def test_execute_runs_token_and_two_input_models_by_their_graphs(models, tmp_path, capsys):
    """``execute`` takes its inputs from the graph's meta (token ids stay integers, both
    arguments of nn.Transformer are drawn), or from ``--input`` as import-torch takes it; a
    float input for an embedding gets import-torch's one-line hint."""
    pytest.importorskip("torch")

    runs = {"Tokens": ["4x12:int64"], "Pair": ["2x6x16", "2x5x16"]}
    for cls, inputs in runs.items():
        graph, schedule = tmp_path / f"{cls}.graph.json", tmp_path / f"{cls}.schedule.json"
        args = [f"{models}:{cls}", *(a for i in inputs for a in ("--input", i)), "-o", str(graph)]
        assert main(["import-torch", *args]) == 0
        solve = [str(graph), "--method", "greedy", "--budget", "gpu=60%", "--no-store"]
        assert main(["solve", *solve, "-o", str(schedule)]) == 0
        capsys.readouterr()
        run = [str(graph), "--schedule", str(schedule), "--device-map", "gpu=cpu", "--json"]
        assert main(["execute", *run]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["gradients_match"] is True
        assert report["measured"]["peak_bytes"] == report["predicted"]["peak_bytes"]
    spec = [
        f"{models}:Tokens",
        "--schedule",
        str(tmp_path / "Tokens.schedule.json"),
        "--device-map",
        "gpu=cpu",
    ]
    assert main(["execute", *spec, "--input", "4x12:int64"]) == 0
    capsys.readouterr()
    assert main(["execute", *spec, "--input", "4x12"]) == 2
    assert "give integer inputs (token ids) their dtype: --input 4x12:int64" in (
        capsys.readouterr().err
    )
