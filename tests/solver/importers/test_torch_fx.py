"""torch.fx import: node counts, sizes, FLOPs and the autograd rules of the training graph."""

from __future__ import annotations

import math
import textwrap

import pytest

torch = pytest.importorskip("torch")

from importer_helpers import traced  # noqa: E402

from solver.errors import GraphFormatError  # noqa: E402
from solver.importers.assemble import assemble_graph, fuse_layers  # noqa: E402
from solver.importers.costmodel import resolve_cost_models  # noqa: E402
from solver.importers.hardware import make_platform  # noqa: E402
from solver.importers.ops import SAVES  # noqa: E402
from solver.importers.torch_fx import import_torch, load_factory  # noqa: E402

BATCH = (32, 3, 224, 224)
# training-graph nodes (forward + loss + backward), counted independently
# (Checkmate's Keras graphs give 45 / 51; AOTAutograd's forward op counts give 2 x ops + 1).
COUNTS = {
    ("vgg16", "layer"): 45,
    ("vgg19", "layer"): 51,
    ("resnet18", "layer"): 63,
    ("resnet18", "op"): 137,
    ("resnet34", "op"): 249,
    ("resnet50", "layer"): 145,
    ("resnet50", "op"): 349,
    ("unet", "layer"): 63,
    ("unet", "op"): 135,
    ("mobilenetv2", "layer"): 129,
    ("mobilenetv2", "op"): 305,
}


def training_graph(name, level, shape=BATCH):
    platform = make_platform()
    ops = traced(name, shape)
    return assemble_graph(ops, platform, resolve_cost_models("roofline", platform), level=level)


@pytest.mark.parametrize(("name", "level"), sorted(COUNTS))
def test_import_torch_node_count_matches_known(name, level):
    graph = training_graph(name, level)
    assert graph.n == COUNTS[name, level]
    kinds = [node.kind for node in graph.nodes]
    assert kinds.count("loss") == 1
    assert kinds.count("forward") == kinds.count("backward") == (graph.n - 1) // 2


def test_import_torch_resnet18_edges_follow_autograd():
    graph = training_graph("resnet18", "op")
    inputs = {n.id: {graph.nodes[j].id for j in graph.inputs[i]} for i, n in enumerate(graph.nodes)}
    assert len(graph.edges) == 211
    assert inputs["add.grad"] == {"layer1_0_relu2.grad"}  # add saves nothing
    assert inputs["layer1_0_bn2.grad"] == {"layer1_0_conv2", "add.grad"}  # BN saves its input
    assert inputs["layer1_0_relu1.grad"] == {"layer1_0_relu1", "layer1_0_conv2.grad"}  # output
    # max-pool: its input, its own indices, and two incoming gradients (fan-out to the skip)
    assert inputs["maxpool.grad"] == {"relu", "maxpool", "add.grad", "layer1_0_conv1.grad"}
    assert inputs["conv1.grad"] == {"bn1.grad"}  # the image is no node


def test_import_torch_output_bytes_are_shape_times_dtype():
    graph = training_graph("resnet18", "op")
    extra_per_element = {"max_pool": 8, "dropout": 1}  # indices, mask kept alongside
    for node in graph.nodes:
        if node.kind == "forward":
            numel = math.prod(node.extra["shape"])
            assert node.memory == numel * (4 + extra_per_element.get(node.op, 0)), node.id
    assert graph.node("fc").memory == 32 * 1000 * 4
    assert graph.node("conv1").memory == 32 * 64 * 112 * 112 * 4


def test_import_torch_backward_memory_is_gradient_of_inputs():
    graph = training_graph("resnet18", "op")
    assert graph.node("conv1.grad").memory == 0  # no gradient for the image
    assert graph.node("layer1_0_conv1.grad").memory == graph.node("maxpool").memory // 3
    assert graph.node("add.grad").memory == graph.node("add").memory  # aliased, one tensor
    assert graph.node("fc.grad").memory == 32 * 512 * 4


def test_fuse_layers_keeps_saved_tensors_in_memory():
    graph = training_graph("resnet18", "layer")
    stem = graph.node("conv1")
    assert stem.op == "conv+batch_norm+relu"
    assert stem.memory == 2 * 32 * 64 * 112 * 112 * 4  # ReLU output + BN input (conv output)
    assert graph.node("layer1_0_conv2").op == "conv+batch_norm"  # feeds the add: no ReLU
    assert graph.node("add").op == "add+relu"


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("vgg16", (2, 3, 224, 224)),
        ("resnet50", (2, 3, 64, 64)),
        ("unet", (1, 3, 64, 64)),
        ("mobilenetv2", (2, 3, 64, 64)),
        ("transformer", (2, 16, 512)),
    ],
)
def test_import_torch_gemm_flops_equal_flop_counter(name, shape):
    from torch.utils.flop_counter import FlopCounterMode

    ops = traced(name, shape)
    with torch.device("meta"):
        model = ops.source.factory().train()
        counter = FlopCounterMode(display=False)
        with counter:
            model(torch.empty(shape))
    gemm = ("conv", "conv_transpose", "linear", "matmul")
    assert sum(op.flops for op in ops.ops if op.kind in gemm) == counter.get_total_flops()


def test_import_torch_folds_views():
    ops = traced("resnet18", (2, 3, 64, 64))
    assert not {"flatten", "view", "reshape"} & {op.kind for op in ops.ops}
    assert ops.op("fc").inputs == ("avgpool",)  # torch.flatten folded into the pool


def probe_saved(fn, *shapes):
    """Which of an op's activations autograd saves: ``input``, ``output`` (or a tensor made
    alongside it, of the output's size: indices, mask). Weights and statistics are ignored."""
    leaves = [torch.randn(*s, requires_grad=True) for s in shapes]
    inputs = [x * 1 for x in leaves]
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = fn(*inputs)
    found = set()
    for t in saved:
        ptr = t.untyped_storage().data_ptr()
        if any(ptr == x.untyped_storage().data_ptr() for x in inputs):
            found.add("input")
        elif ptr == out.untyped_storage().data_ptr() or t.numel() == out.numel():
            found.add("output")
    return frozenset(found)


@pytest.mark.parametrize(
    ("kind", "fn", "shapes"),
    [
        ("conv", lambda: torch.nn.Conv2d(3, 4, 3), [(2, 3, 8, 8)]),
        ("linear", lambda: torch.nn.Linear(8, 4), [(2, 8)]),
        ("batch_norm", lambda: torch.nn.BatchNorm2d(3), [(2, 3, 4, 4)]),
        ("relu", lambda: torch.nn.ReLU(), [(2, 3, 4, 4)]),
        ("relu6", lambda: torch.nn.ReLU6(), [(2, 3, 4, 4)]),
        ("max_pool", lambda: torch.nn.MaxPool2d(2), [(2, 3, 4, 4)]),
        ("adaptive_avg_pool", lambda: torch.nn.AdaptiveAvgPool2d(7), [(2, 3, 14, 14)]),
        ("global_avg_pool", lambda: torch.nn.AdaptiveAvgPool2d(1), [(2, 3, 14, 14)]),
        ("dropout", lambda: torch.nn.Dropout(), [(2, 3, 4, 4)]),
        ("add", lambda: lambda a, b: a + b, [(2, 3), (2, 3)]),
        ("cat", lambda: lambda a, b: torch.cat([a, b], 1), [(2, 3), (2, 3)]),
        ("matmul", lambda: lambda a, b: a @ b, [(2, 3, 4), (2, 4, 5)]),
        ("softmax", lambda: lambda a: a.softmax(-1), [(2, 3)]),
        ("gelu", lambda: torch.nn.GELU(), [(2, 3)]),
        ("layer_norm", lambda: torch.nn.LayerNorm(3), [(2, 3)]),
        ("scale", lambda: lambda a: a * 0.5, [(2, 3)]),
    ],
)
def test_saves_table_matches_autograd(kind, fn, shapes):
    assert probe_saved(fn(), *shapes) == SAVES[kind]


def test_import_torch_user_module_from_file(tmp_path):
    source = tmp_path / "mynet.py"
    source.write_text(
        textwrap.dedent(
            """
            import torch
            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1, self.act, self.fc2 = torch.nn.Linear(256, 1024), torch.nn.ReLU(), \\
                        torch.nn.Linear(1024, 10)
                def forward(self, x):
                    return self.fc2(self.act(self.fc1(x)))
            """
        )
    )
    graph = import_torch(f"{source}:Net", (64, 256), level="op")
    assert [n.id for n in graph.nodes] == [
        "fc1", "act", "fc2", "loss", "fc2.grad", "act.grad", "fc1.grad"
    ]  # fmt: skip
    assert graph.node("fc1").memory == 64 * 1024 * 4
    assert graph.device("gpu").fixed_memory == 2 * 4 * (256 * 1024 + 1024 + 1024 * 10 + 10)
    assert graph.meta["source"] == f"{source}:Net"


def test_load_factory_rejects_bad_specs():
    with pytest.raises(GraphFormatError, match="is not 'module:Class'"):
        load_factory("no_colon_here")
    with pytest.raises(GraphFormatError, match="cannot import 'no.such.module'"):
        load_factory("no.such.module:Net")
    with pytest.raises(GraphFormatError, match="has no attribute 'Nope'"):
        load_factory("solver.importers.zoo_models:Nope")


def test_import_torch_untraceable_model_names_the_problem(tmp_path):
    source = tmp_path / "branchy.py"
    source.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * 2 if x.sum() > 0 else x\n"
    )
    with pytest.raises(GraphFormatError, match="cannot trace the model"):
        import_torch(f"{source}:Net", (2, 3))


def test_import_torch_wrong_input_shape_names_the_node():
    with pytest.raises(GraphFormatError, match=r"at node .*; .*accept input \(2, 5\)"):
        import_torch("solver.importers.zoo_models:ResNet18", (2, 5))


def test_fuse_layers_counts_match_note():
    ops = traced("mobilenetv2", BATCH)
    assert len(ops.ops) == 152 and len(fuse_layers(ops)) == 64
