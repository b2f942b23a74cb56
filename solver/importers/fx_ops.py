"""What each torch.fx node is: a view, a compute op of some kind, or nothing (sizes, params).

The tables are keyed by torch classes and functions, so they are built on first use (torch is an
optional extra). Unknown modules and functions become kind ``other``: they still get a node,
with elementwise FLOPs and the conservative assumption that their backward reads their inputs.
"""

from __future__ import annotations

import math
import operator
from functools import cache
from typing import Any

from solver.importers._deps import require_torch
from solver.importers.ops import conv_flops, conv_transpose_flops, elementwise_flops

__all__ = ["VIEW", "node_kind", "node_flops", "node_params", "tensor_metas"]

VIEW = "view"

_VIEW_METHODS = {
    "view",
    "reshape",
    "flatten",
    "unflatten",
    "transpose",
    "permute",
    "contiguous",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "view_as",
    "reshape_as",
    "chunk",
    "split",
    "unbind",
    "t",
    "narrow",
    "select",
}
_METHOD_KINDS = {
    "relu": "relu",
    "softmax": "softmax",
    "mean": "mean",
    "add": "add",
    "sub": "add",
    "mul": "mul",
    "matmul": "matmul",
    "bmm": "matmul",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
}


@cache
def _module_kinds() -> tuple[tuple[type, str], ...]:
    nn = require_torch("the torch.fx importer").nn
    return (
        ((nn.Conv1d, nn.Conv2d, nn.Conv3d), "conv"),
        ((nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d), "conv_transpose"),
        ((nn.Linear,), "linear"),
        ((nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm), "batch_norm"),
        ((nn.LayerNorm, nn.GroupNorm), "layer_norm"),
        ((nn.ReLU,), "relu"),
        ((nn.ReLU6, nn.Hardtanh), "relu6"),
        ((nn.GELU,), "gelu"),
        ((nn.SiLU,), "silu"),
        ((nn.Sigmoid,), "sigmoid"),
        ((nn.Tanh,), "tanh"),
        ((nn.Softmax,), "softmax"),
        ((nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d), "max_pool"),
        ((nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d), "avg_pool"),
        ((nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d), "adaptive_avg_pool"),
        ((nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d), "dropout"),
        ((nn.Flatten, nn.Unflatten, nn.Identity), VIEW),
    )


@cache
def _function_kinds() -> dict[Any, str]:
    torch = require_torch("the torch.fx importer")
    F = torch.nn.functional
    table = {
        "add": [operator.add, operator.iadd, operator.sub, torch.add, torch.sub],
        "mul": [operator.mul, operator.truediv, torch.mul, torch.div],
        "matmul": [operator.matmul, torch.matmul, torch.bmm, torch.mm],
        "cat": [torch.cat, torch.concat],
        "relu": [F.relu, torch.relu],
        "relu6": [F.relu6, F.hardtanh],
        "gelu": [F.gelu],
        "silu": [F.silu],
        "sigmoid": [torch.sigmoid, F.sigmoid],
        "tanh": [torch.tanh, F.tanh],
        "softmax": [F.softmax, torch.softmax],
        "dropout": [F.dropout],
        "max_pool": [F.max_pool1d, F.max_pool2d, F.max_pool3d],
        "avg_pool": [F.avg_pool1d, F.avg_pool2d, F.avg_pool3d],
        "adaptive_avg_pool": [F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d],
        "mean": [torch.mean],
        "layer_norm": [F.layer_norm, F.group_norm],
        "batch_norm": [F.batch_norm],
        "linear": [F.linear],
        "conv": [F.conv1d, F.conv2d, F.conv3d],
        VIEW: [
            torch.flatten,
            torch.reshape,
            torch.transpose,
            torch.permute,
            torch.squeeze,
            torch.unsqueeze,
            torch.chunk,
            torch.split,
            torch.unbind,
            operator.getitem,
            getattr,
        ],
    }
    return {fn: kind for kind, fns in table.items() for fn in fns}


def tensor_metas(node) -> list:
    """The tensor metadata ShapeProp left on ``node`` (several for tuple outputs, none for ints)."""
    meta = node.meta.get("tensor_meta")
    if meta is None:
        return []
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        return [meta]
    if isinstance(meta, list | tuple):
        return [m for m in meta if hasattr(m, "shape") and hasattr(m, "dtype")]
    return []


def node_kind(node, module) -> str:
    """The op kind of a ``call_*`` node (``VIEW`` for views), refined by shapes where needed."""
    if node.op == "call_module":
        kind = next((k for types, k in _module_kinds() if isinstance(module, types)), "other")
    elif node.op == "call_method":
        kind = VIEW if node.target in _VIEW_METHODS else _METHOD_KINDS.get(node.target, "other")
    else:
        kind = _function_kinds().get(node.target, "other")
    if kind == "mul" and sum(bool(tensor_metas(a)) for a in node.all_input_nodes) < 2:
        return "scale"
    if kind == "adaptive_avg_pool" and all(s == 1 for s in _shape(node)[2:]):
        return "global_avg_pool"
    return kind


def node_flops(node, kind: str, module) -> float:
    """Forward FLOPs of a compute node (multiply-add = 2; see :mod:`solver.importers.ops`)."""
    out = _shape(node)
    inputs = [tensor_metas(a)[0].shape for a in node.all_input_nodes if tensor_metas(a)]
    first = tuple(inputs[0]) if inputs else out
    if kind == "conv":
        weight = module.weight if module is not None else tensor_metas(node.args[1])[0]
        kernel = tuple(weight.shape[2:])
        groups = module.groups if module is not None else node.kwargs.get("groups", 1)
        return conv_flops(out, first[1], groups, kernel)
    if kind == "conv_transpose":
        return conv_transpose_flops(first, module.out_channels, module.groups, module.kernel_size)
    if kind == "linear":
        return 2.0 * math.prod(first) * out[-1]
    if kind == "matmul":
        return 2.0 * math.prod(out) * first[-1]
    window = 1
    if kind in ("max_pool", "avg_pool") and module is not None:
        size = module.kernel_size
        window = math.prod(size) if isinstance(size, tuple) else size ** (len(out) - 2)
    return elementwise_flops(kind, math.prod(out), math.prod(first), window)


def node_params(node, module, gm) -> int:
    """Parameters the node uses: its module's, or the ``get_attr`` tensors it reads."""
    if module is not None:
        return sum(p.numel() for p in module.parameters())
    total = 0
    for arg in node.all_input_nodes:
        if arg.op == "get_attr":
            value = operator.attrgetter(arg.target)(gm)
            total += value.numel() if hasattr(value, "numel") else 0
    return total


def _shape(node) -> tuple[int, ...]:
    metas = tensor_metas(node)
    return tuple(metas[0].shape) if metas else ()
