"""ATen joint-graph import, checked against torch itself: FLOPs, saved tensors, names, errors."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from solver.cli import main  # noqa: E402
from solver.errors import GraphFormatError  # noqa: E402
from solver.importers.aten import capture_model, graph_from_plan, import_aten  # noqa: E402
from solver.importers.aten_capture import loss_of, node_tag  # noqa: E402
from solver.importers.aten_groups import (  # noqa: E402
    bases,
    flop_mapping,
    plan_groups,
    tensor_inputs,
)
from solver.importers.hardware import make_platform  # noqa: E402
from solver.importers.zoo_composite import COMPOSITE  # noqa: E402
from solver.importers.zoo_models import ZOO  # noqa: E402

#: Composite models (not in the zoo) at small sizes: capture is shape-independent in cost.
SMALL = {
    "encoder": (2, 16, 64),
    "attention": (2, 16, 256),
    "grouped-conv": (2, 3, 32, 32),
    "sdpa": (2, 16, 128),
    "lstm": (2, 8, 32),
}
ZOO_SMALL = {name: (1, *shape[1:]) for name, (_, shape) in ZOO.items()}
ZOO_SMALL.update({"vgg16": (1, 3, 32, 32), "vgg19": (1, 3, 32, 32), "unet": (1, 3, 32, 32)})
ZOO_SMALL["transformer"] = (1, 16, 512)


@functools.cache
def plan(name: str, level: str = "layer", zoo: bool = False):
    cls = ZOO[name][0] if zoo else COMPOSITE[name][0]
    shape = ZOO_SMALL[name] if zoo else SMALL[name]
    return plan_groups(capture_model(cls, shape, name=name), level)


def torch_flops(model, x) -> int:
    with FlopCounterMode(display=False, custom_mapping=flop_mapping()) as counter:
        model(x)
    return counter.get_total_flops()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_aten_forward_flops_equal_flop_counter_on_composite_models(name):
    torch.manual_seed(0)
    expected = torch_flops(COMPOSITE[name][0]().train(), torch.randn(SMALL[name]))
    ours = plan(name).forward_flops
    assert expected > 0
    assert abs(ours - expected) <= 0.05 * expected
    assert ours == expected  # same formulas per op: nothing lost, nothing counted twice


@pytest.mark.parametrize("name", sorted(ZOO_SMALL))
def test_aten_forward_flops_equal_flop_counter_on_the_zoo(name):
    with torch.device("meta"):  # FlopCounterMode needs shapes only
        model = ZOO[name][0]().train()
        expected = torch_flops(model, torch.empty(ZOO_SMALL[name]))
    assert abs(plan(name, zoo=True).forward_flops - expected) <= 0.05 * expected


def test_aten_encoder_flops_match_the_issue_example():
    """nn.TransformerEncoder, 4 x (256, 8, 1024), input 8x128x64: FlopCounterMode says 7.0e9
    (issue 9); torch.fx saw 3.4e7. Captured with fake tensors: no weights, under a second."""
    capture = capture_model(COMPOSITE["encoder"][0], (8, 128, 64))
    flops = plan_groups(capture, "layer").forward_flops
    with torch.device("meta"):
        expected = torch_flops(COMPOSITE["encoder"][0]().train(), torch.empty(8, 128, 64))
    assert flops == expected
    assert 6.9e9 < flops < 7.1e9


def autograd_saved(model, *xs) -> list[int]:
    """Bytes of every storage autograd saves for the backward (weights and inputs excluded)."""
    fixed = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers(), *xs)}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in fixed:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(model(*xs))
    del loss
    return sorted(saved.values())


def captured_saved(group_plan) -> dict[str, int]:
    """Forward values the captured backward ops read (through views), with their bytes."""
    nodes = list(group_plan.capture.gm.graph.nodes)
    base = bases(nodes)
    by_name = {n.name: n for n in nodes}
    saved = {}
    for node in nodes:
        if node.op != "call_function" or node_tag(node).get("phase") != "backward":
            continue
        for arg in tensor_inputs(node):  # ones_like(loss) reads only the loss's shape
            root = by_name[base[arg.name]]
            if root.op == "call_function" and node_tag(root).get("phase") != "backward":
                val = root.meta["val"]
                saved[root.name] = val.numel() * val.dtype.itemsize
    return saved


@pytest.mark.parametrize("name", ["encoder", "attention", "grouped-conv", "sdpa"])
def test_aten_saved_tensors_equal_what_autograd_saves(name):
    torch.manual_seed(0)
    model = COMPOSITE[name][0]().train()
    expected = autograd_saved(model, torch.randn(SMALL[name]))
    group_plan = plan(name, "op")
    saved = captured_saved(group_plan)
    assert sorted(saved.values()) == expected
    # ... and the graph says so: a forward node feeds a backward node exactly when it owns
    # one of those tensors.
    graph = graph_from_plan(group_plan, make_platform())
    feeding = {
        graph.nodes[i].id
        for i, k in graph.edge_pairs
        if graph.nodes[i].kind == "forward" and graph.nodes[k].kind in ("backward", "loss")
    }
    assert feeding == {group_plan.owner[v] for v in saved}


def test_aten_lstm_saves_what_autograd_saves_with_the_onednn_workspace():
    """The fake kernel of mkldnn_rnn_layer returns an empty workspace; the capture sizes it by
    running each layer shape once for real, so the two LSTM layers' oneDNN workspaces (84 KiB
    each here, the largest tensors saved) are counted as autograd saves them."""
    torch.manual_seed(0)
    expected = autograd_saved(COMPOSITE["lstm"][0]().train(), torch.randn(SMALL["lstm"]))
    group_plan = plan("lstm", "op")
    assert sorted(captured_saved(group_plan).values()) == expected
    assert expected[-2:] == [86016, 86016]
    assert group_plan.capture.meta["rnn_workspace_bytes"] == [86016, 86016]


def test_aten_layer_level_names_nodes_by_module():
    graph = import_aten(COMPOSITE["encoder"][0], (8, 128, 64), level="layer")
    ids = [n.id for n in graph.nodes]
    # 14 forward layers, the loss, 14 backward layers; no workspace nodes: a workspace on each
    # backward layer whose intermediates outgrow what it keeps (13; the head's backward keeps
    # its peak) and on the loss (the squares of mean(out ** 2), freed inside it)
    assert graph.n == 29 <= 80
    assert not [i for i in ids if i.endswith(".workspace")]
    with_workspace = [n.id for n in graph.nodes if n.workspace]
    assert len(with_workspace) == 14 and "loss" in with_workspace
    assert all(graph.node(i).kind in ("backward", "loss") for i in with_workspace)
    loss = graph.node("loss")
    assert (loss.memory, loss.workspace) == (8 * 128 * 10 * 4, 2 * 8 * 128 * 10 * 4)
    # the bytes the 14 workspace nodes of the previous import held (encoder-aten.graph.json
    # before this change: 72433664 over its 14 `.workspace` nodes), now on their nodes
    assert sum(n.workspace for n in graph.nodes) == 72433664
    layer0 = ["enc.layers.0.self_attn", "enc.layers.0.linear1", "enc.layers.0.linear2"]
    assert ids[:4] == ["embed", *layer0]
    assert "enc.layers.2.self_attn" in ids and "enc.layers.2.self_attn.grad" in ids
    assert graph.node("enc.layers.2.self_attn.grad").workspace > 0
    assert [n.kind for n in graph.nodes].count("loss") == 1
    assert graph.node("enc.layers.2.self_attn.grad").of == "enc.layers.2.self_attn"
    assert graph.meta["forward_flops"] == pytest.approx(7.018e9, rel=1e-3)


def test_aten_backward_node_reads_saved_tensors_and_incoming_gradient():
    graph = graph_from_plan(plan("encoder"), make_platform())

    def inputs(node_id):
        return {graph.nodes[i].id for i in graph.inputs[graph.index[node_id]]}

    # linear1 = Linear + ReLU + dropout: its backward reads the Linear's input (the output of
    # self_attn+norm1), the ReLU output and the dropout mask it keeps itself, and the gradient
    # arriving from linear2's backward; nothing else.
    expected = {"enc.layers.1.self_attn", "enc.layers.1.linear1", "enc.layers.1.linear2.grad"}
    assert inputs("enc.layers.1.linear1.grad") == expected
    assert graph.node("enc.layers.1.linear1.grad").workspace > 0  # its intermediates
    # the head's backward reads its input (the last layer's output) and the loss's gradient
    assert inputs("head.grad") == {"enc.layers.3.linear2", "loss"}
    assert inputs("loss") == {"head"}


def test_aten_op_level_keeps_one_node_per_op():
    group_plan = plan("encoder", "op")
    ids = [g.id for g in group_plan.groups]
    assert "enc.layers.0.self_attn.bmm" in ids and "enc.layers.0.self_attn.bmm.grad" in ids
    assert len(ids) == 181 and not [i for i in ids if i.endswith(".workspace")]
    assert group_plan.forward_flops == plan("encoder").forward_flops


def test_aten_measured_costs_time_every_node_on_the_cpu():
    graph = import_aten(COMPOSITE["sdpa"][0], (1, 8, 128), cost_model="measured")
    assert "measured on the local CPU" in graph.meta["cost_model"]["cpu"]
    assert "roofline" in graph.meta["cost_model"]["gpu"]
    assert all(n.cost["cpu"] > 0 for n in graph.nodes)


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: no single graph
            return self.fc(x)
        return x


def test_aten_uncapturable_model_says_why_and_what_to_do():
    with pytest.raises(GraphFormatError) as info:
        import_aten(Branchy, (2, 8), name="branchy")
    message = str(info.value)
    assert message.startswith(
        "branchy: cannot capture the training step: data-dependent control flow "
        "(a Python branch on a tensor's value) at test_aten.py:"
    )
    assert message.endswith("export the model to ONNX, which records the branch an example "
                            "input takes, and import that file")  # fmt: skip


class PooledNorm(torch.nn.Module):
    """A batch norm after a global pooling (inception's auxiliary head): one value per
    channel at batch 1, which batch norm refuses in training."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return self.norm(torch.nn.functional.adaptive_avg_pool2d(self.conv(x), 1))


def test_aten_batch_norm_at_batch_1_says_to_import_a_larger_batch():
    with pytest.raises(GraphFormatError) as info:
        import_aten(PooledNorm, (1, 3, 8, 8), name="pooled")
    message = str(info.value)
    assert message.startswith(
        "pooled: cannot capture the training step: a batch norm in training sees one value "
        "per channel (its input is [1, 4, 1, 1]) at test_aten.py:"
    )
    assert message.endswith("import with a larger batch, e.g. --input 2x3x8x8")
    assert "\n" not in message
    import_aten(PooledNorm, (2, 3, 8, 8), name="pooled")  # and at batch 2 it imports


def test_import_torch_command_uncapturable_is_one_line_and_exit_2(capsys):
    spec = f"{__file__}:Branchy"
    assert main(["import-torch", spec, "--input", "2x8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: branchy: cannot capture the training step: data-dependent")
    assert err.count("\n") == 1


def test_graph_from_plan_finds_the_parameter_placeholders_once(monkeypatch):
    """Once per graph, not once per placeholder: over every node of the capture each time, it
    was quadratic (a quarter of a second of DenseNet-121's import, 728 placeholders)."""
    from solver.importers import aten

    model = functools.partial(torch.nn.Sequential, *(torch.nn.Linear(4, 4) for _ in range(6)))
    plan = plan_groups(capture_model(model, (2, 4), name="stack"), "layer")
    calls = []
    listed = aten._param_placeholders
    monkeypatch.setattr(aten, "_param_placeholders", lambda c: calls.append(1) or listed(c))
    graph = graph_from_plan(plan, make_platform())
    assert len(calls) == 1
    assert graph.device("gpu").fixed_memory == 2 * 6 * (16 + 4) * 4  # parameters + gradients
