"""ONNX models for the hostile-input kit (``bench/hostile.py``): one good, many bad.

Built with ``onnx.helper`` only (no torch), each a few hundred bytes. The good model is a small
conv net; every bad one differs from it in one way the importer must refuse in one line naming
the operator and the node: an unsupported operator, a custom domain, an unknown operator,
control flow, a tensor nobody defines, sizes beyond 2^53 bytes, or a broken file.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["GOOD", "BAD", "build", "damaged_bytes"]

GOOD = "conv-relu"
"""The well-formed model (imports to a training graph)."""


def _helpers():
    import onnx
    from onnx import TensorProto, helper

    return onnx, TensorProto, helper


def _model(nodes, inputs, outputs, initializers=(), opsets=None, value_info=()):
    onnx, _, helper = _helpers()
    graph = helper.make_graph(
        nodes, "hostile", inputs, outputs, initializer=list(initializers), value_info=value_info
    )
    opsets = opsets or [helper.make_opsetid("", 17)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="hostile-kit")
    model.ir_version = 8
    return model


def _conv_stem(shape=(2, 3, 8, 8)):
    """Conv -> Relu on ``x``: the nodes, the data input and the weight initializer."""
    _, TensorProto, helper = _helpers()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    weight = helper.make_tensor(
        "w", TensorProto.FLOAT, [4, shape[1], 3, 3], [0.1] * (4 * shape[1] * 9)
    )
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="/relu/Relu"),
    ]
    return nodes, x, weight


def _out(name: str, shape):
    _, TensorProto, helper = _helpers()
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def conv_relu():
    _, _, helper = _helpers()
    nodes, x, w = _conv_stem()
    nodes.append(
        helper.make_node(
            "MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]
        )
    )
    nodes.append(helper.make_node("Relu", ["p"], ["y"], name="/relu2/Relu"))
    return _model(nodes, [x], [_out("y", [2, 4, 4, 4])], [w])


def unsupported_nms():
    """NonMaxSuppression: its output's size depends on the data."""
    _, TensorProto, helper = _helpers()
    nodes, x, w = _conv_stem()
    shape = helper.make_tensor("s", TensorProto.INT64, [3], [2, 32, 4])
    nodes.append(helper.make_node("Reshape", ["r", "s"], ["boxes"], name="/head/Reshape"))
    nodes.append(
        helper.make_node(
            "ReduceMean", ["boxes"], ["scores"], name="/head/ReduceMean", axes=[2], keepdims=0
        )
    )
    nodes.append(
        helper.make_node("Unsqueeze", ["scores", "ax"], ["scores3"], name="/head/Unsqueeze")
    )
    nodes.append(
        helper.make_node(
            "NonMaxSuppression", ["boxes", "scores3"], ["keep"], name="/post/NonMaxSuppression"
        )
    )
    axes = helper.make_tensor("ax", TensorProto.INT64, [1], [1])
    out = helper.make_tensor_value_info("keep", TensorProto.INT64, None)
    return _model(nodes, [x], [out], [w, shape, axes])


def custom_domain():
    _, _, helper = _helpers()
    nodes, x, w = _conv_stem()
    nodes.append(
        helper.make_node("FancyAct", ["r"], ["f"], name="/act/FancyAct", domain="com.example")
    )
    nodes.append(helper.make_node("Relu", ["f"], ["g"], name="/relu2/Relu"))
    nodes.append(helper.make_node("Relu", ["g"], ["y"], name="/relu3/Relu"))
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    return _model(nodes, [x], [_out("y", [2, 4, 8, 8])], [w], opsets)


def unknown_op():
    _, _, helper = _helpers()
    nodes, x, w = _conv_stem()
    nodes.append(helper.make_node("Frobnicate", ["r"], ["f"], name="/act/Frobnicate"))
    nodes.append(helper.make_node("Relu", ["f"], ["g"], name="/relu2/Relu"))
    nodes.append(helper.make_node("Relu", ["g"], ["y"], name="/relu3/Relu"))
    return _model(nodes, [x], [_out("y", [2, 4, 8, 8])], [w])


def control_flow_if():
    _, TensorProto, helper = _helpers()
    nodes, x, w = _conv_stem()
    then_graph = helper.make_graph(
        [helper.make_node("Relu", ["r"], ["t"], name="/then/Relu")],
        "then",
        [],
        [_out("t", [2, 4, 8, 8])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["r"], ["e"], name="/else/Sigmoid")],
        "else",
        [],
        [_out("e", [2, 4, 8, 8])],
    )
    cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
    nodes.append(
        helper.make_node(
            "If", ["cond"], ["y"], name="/branch/If", then_branch=then_graph, else_branch=else_graph
        )
    )
    return _model(nodes, [x], [_out("y", [2, 4, 8, 8])], [w, cond])


def control_flow_loop():
    _, TensorProto, helper = _helpers()
    nodes, x, w = _conv_stem()
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Relu", ["carried"], ["next"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("carried", TensorProto.FLOAT, [2, 4, 8, 8]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            _out("next", [2, 4, 8, 8]),
        ],
    )
    trips = helper.make_tensor("trips", TensorProto.INT64, [], [3])
    cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
    nodes.append(
        helper.make_node("Loop", ["trips", "cond", "r"], ["y"], name="/loop/Loop", body=body)
    )
    return _model(nodes, [x], [_out("y", [2, 4, 8, 8])], [w, trips, cond])


def undefined_tensor():
    _, _, helper = _helpers()
    nodes, x, w = _conv_stem()
    nodes.append(helper.make_node("Add", ["r", "ghost"], ["a"], name="/add/Add"))
    nodes.append(helper.make_node("Relu", ["a"], ["y"], name="/relu2/Relu"))
    return _model(nodes, [x], [_out("y", [2, 4, 8, 8])], [w])


def huge_sizes():
    """Every shape static, the activations far beyond 2^53 bytes."""
    return _model(*_conv_net((2**22, 3, 2**14, 2**14)))


def _conv_net(shape):
    nodes, x, w = _conv_stem(shape)
    return nodes, [x], [_out("r", [shape[0], 4, shape[2], shape[3]])], [w]


def no_nodes():
    _, TensorProto, helper = _helpers()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    return _model([], [x], [x])


def symbolic_batch():
    """The batch size is symbolic ("N"): fine with ``--input``, refused without."""
    _, TensorProto, helper = _helpers()
    nodes, _, w = _conv_stem()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    return _model(nodes, [x], [_out("r", ["N", 4, 8, 8])], [w])


def node_without_outputs():
    _, _, helper = _helpers()
    nodes, x, w = _conv_stem()
    nodes.append(helper.make_node("Relu", ["r"], [], name="/relu2/Relu"))
    return _model(nodes, [x], [_out("r", [2, 4, 8, 8])], [w])


def wrong_types():
    """An Add of a float and an int64 tensor: shape inference fails."""
    _, TensorProto, helper = _helpers()
    nodes, x, w = _conv_stem()
    k = helper.make_tensor("k", TensorProto.INT64, [1], [1])
    nodes.append(helper.make_node("Add", ["r", "k"], ["y"], name="/add/Add"))
    return _model(nodes, [x], [_out("y", [2, 4, 8, 8])], [w, k])


BUILDERS: dict[str, Callable] = {
    GOOD: conv_relu,
    "symbolic-batch": symbolic_batch,
    "unsupported-nms": unsupported_nms,
    "custom-domain": custom_domain,
    "unknown-op": unknown_op,
    "control-flow-if": control_flow_if,
    "control-flow-loop": control_flow_loop,
    "undefined-tensor": undefined_tensor,
    "huge-sizes": huge_sizes,
    "no-nodes": no_nodes,
    "node-without-outputs": node_without_outputs,
    "wrong-types": wrong_types,
}
BAD = {
    "unsupported-nms": ("NonMaxSuppression", "/post/NonMaxSuppression"),
    "custom-domain": ("FancyAct", "/act/FancyAct"),
    "unknown-op": ("Frobnicate", "/act/Frobnicate"),
    "control-flow-if": ("If", "/branch/If"),
    "control-flow-loop": ("Loop", "/loop/Loop"),
    "undefined-tensor": ("Add", "/add/Add"),
    "huge-sizes": (None, None),
    "no-nodes": (None, None),
    "node-without-outputs": ("Relu", "/relu2/Relu"),
    "wrong-types": ("Add", "/add/Add"),
}
"""Models that must be refused, with the operator and node the one line must name (or None)."""


def build(name: str) -> bytes:
    """The serialized model ``name`` (a key of :data:`BUILDERS`)."""
    return BUILDERS[name]().SerializeToString()


def damaged_bytes(rng: random.Random) -> bytes:
    """The good model cut short, with a byte flipped, or doubled."""
    data = bytearray(build(GOOD))
    kind = rng.randrange(3)
    if kind == 0:
        return bytes(data[: rng.randrange(1, len(data))])
    if kind == 1:
        at = rng.randrange(len(data))
        data[at] = rng.randrange(256)
        return bytes(data)
    return bytes(data) + bytes(data)
