"""The walk over an ONNX graph that turns its nodes into :class:`~solver.importers.ops.Op`.

Kept apart from :mod:`solver.importers.onnx_import` (file handling, the public functions) so
each stays small. The classification mirrors :mod:`solver.importers.fx_ops`, so that a network
exported from PyTorch gives the same ops, names included, as its torch.fx trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from solver.errors import GraphFormatError
from solver.importers.ops import Op, conv_flops, conv_transpose_flops, elementwise_flops

__all__ = ["OnnxWalker", "tensor_types"]

_VIEWS = {
    "Flatten",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Expand",
    "Split",
    "Slice",
}
_KINDS = {
    "Conv": "conv",
    "ConvTranspose": "conv_transpose",
    "Gemm": "linear",
    "MatMul": "matmul",
    "BatchNormalization": "batch_norm",
    "LayerNormalization": "layer_norm",
    "InstanceNormalization": "layer_norm",
    "GroupNormalization": "layer_norm",
    "Relu": "relu",
    "Clip": "relu6",
    "Gelu": "gelu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Softmax": "softmax",
    "MaxPool": "max_pool",
    "AveragePool": "avg_pool",
    "GlobalAveragePool": "global_avg_pool",
    "ReduceMean": "mean",
    "Dropout": "dropout",
    "Add": "add",
    "Sub": "add",
    "Mul": "mul",
    "Div": "mul",
    "Concat": "cat",
}
_FUNCTIONAL = {"add", "mul", "scale", "cat", "matmul", "mean", "other"}  # no module of their own
_STATIC = ""  # producer of a static tensor (weights, constants, shapes)


_FLOAT_TYPES = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def tensor_types(onnx, model) -> dict[str, tuple[tuple[int, ...], int, bool]]:
    """Tensor name -> (shape, itemsize, is floating point), for every tensor with a known type."""
    result = {}
    graph = model.graph
    for init in graph.initializer:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
        result[init.name] = (tuple(init.dims), itemsize, init.data_type in _FLOAT_TYPES)
    for info in [*graph.input, *graph.value_info, *graph.output]:
        tensor = info.type.tensor_type
        if not tensor.elem_type:
            continue
        dims = (-1,)  # unknown rank
        if tensor.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize
        result[info.name] = (dims, itemsize, tensor.elem_type in _FLOAT_TYPES)
    return result


class OnnxWalker:
    """One pass over the ONNX nodes, in file order (ONNX requires a topological order).

    ``producer`` maps every tensor name to the op that made it (``None`` for the data input,
    ``""`` for static tensors); views and bias adds map their output to their input's op.
    """

    def __init__(self, graph, types: Mapping, data: str, path: str) -> None:
        self.graph, self.types, self.path = graph, types, path
        self.producer: dict[str, str | None] = {data: None}
        for tensor in [*graph.initializer, *graph.input]:
            self.producer.setdefault(tensor.name, _STATIC)
        self.weights = {t for t, p in self.producer.items() if p == _STATIC}  # and derived
        self.ops: list[dict[str, Any]] = []
        self.index: dict[str, int] = {}
        self.buffers: set[str] = set()
        self.names: set[str] = set()

    def walk(self) -> list[Op]:
        """The compute ops of the graph, in order."""
        for node in self.graph.node:
            self._visit(node)
        if not self.ops:
            raise GraphFormatError(
                "no compute operator", path=self.path, where="graph", fix="check the model"
            )
        return [Op(**fields) for fields in self.ops]

    def parameters(self) -> int:
        """Trainable parameters: weight tensors less BN running statistics."""
        names = {t.name for t in [*self.graph.initializer, *self.graph.input[1:]]}
        return sum(
            math.prod(self.types[t][0])
            for t in names - self.buffers
            if t in self.types and self.types[t][2]
        )

    def _visit(self, node) -> None:
        inputs = [i for i in node.input if i]
        active = [i for i in inputs if self.producer.get(i, _STATIC) != _STATIC]
        outputs = [o for o in node.output if o]
        if node.op_type == "BatchNormalization":
            self.buffers.update(inputs[3:5])
        if active and outputs[0] not in self.types:
            # an untyped output used to be taken for a static tensor: the node and all after
            # it vanished from the graph (onnx_checks refuses the known causes first)
            raise GraphFormatError(
                f"shape inference could not give its output {outputs[0]!r} a type",
                path=self.path,
                where=f"node {node.name or outputs[0]!r} (op {node.op_type})",
                fix="export the network with standard ONNX operators and fixed input sizes",
            )
        if not active or node.op_type in ("Shape", "Constant") or not self._is_float(outputs[0]):
            self.producer.update(dict.fromkeys(outputs, _STATIC))
            if any(i in self.weights for i in inputs):
                self.weights.update(outputs)  # e.g. Transpose(weight) before a MatMul
            return
        owner = self.producer[active[0]]
        static = [i for i in inputs if i not in active and i in self.weights]
        if node.op_type in _VIEWS or (
            node.op_type == "Add"
            and static
            and owner is not None
            and self.ops[self.index[owner]]["kind"] == "linear"
        ):
            if owner is not None and node.op_type == "Add":
                self.ops[self.index[owner]]["params"] += self._numel(static)
            self.producer.update(dict.fromkeys(outputs, owner))
            return
        self._add_op(node, active, static, outputs)

    def _add_op(self, node, active, static, outputs) -> None:
        kind = _KINDS.get(node.op_type, "other")
        if kind == "matmul" and static:
            kind = "linear"
        elif kind == "mul" and len(active) < 2:
            kind = "scale"
        shape, itemsize, _ = self._type(outputs[0])
        numel = math.prod(shape)
        extra = sum(self._bytes(o) for o in outputs[1:] if o in self.types)
        if kind == "max_pool":
            extra = numel * 8  # int64 indices, as torch keeps them
        elif kind == "dropout":
            extra = numel  # a bool mask
        elif kind == "batch_norm":
            extra = 0  # running statistics are buffers, not activations
        params = self._numel(static[:2] if kind == "batch_norm" else static)
        name = self._unique(node, kind)
        self.index[name] = len(self.ops)
        self.ops.append(
            dict(
                name=name,
                kind=kind,
                inputs=tuple(self.producer[a] for a in active),
                input_bytes=tuple(self._bytes(a) for a in active),
                shape=shape,
                itemsize=itemsize,
                flops=self._flops(node, kind, active, static, shape),
                params=params,
                extra_bytes=extra,
                label=node.op_type,
            )
        )
        self.producer.update(dict.fromkeys(outputs, name))

    def _flops(self, node, kind: str, active, static, shape) -> float:
        first = self._type(active[0])[0]
        attrs = {a.name: a for a in node.attribute}
        group = attrs["group"].i if "group" in attrs else 1
        if kind in ("conv", "conv_transpose"):
            weight = self._type(static[0])[0] if static else self._type(active[1])[0]
            if kind == "conv":
                return conv_flops(shape, first[1], group, weight[2:])
            return conv_transpose_flops(first, weight[1] * group, group, weight[2:])
        if kind in ("linear", "matmul"):
            transposed = "transA" in attrs and attrs["transA"].i
            return 2.0 * math.prod(shape) * (first[-2] if transposed else first[-1])
        window = math.prod(attrs["kernel_shape"].ints) if "kernel_shape" in attrs else 1
        return elementwise_flops(kind, math.prod(shape), math.prod(first), window)

    def _unique(self, node, kind: str) -> str:
        """A readable id like fx's: the module path (``layer1_0_conv1``) for module ops, the
        kind with a counter (``add``, ``add_1``) for functional ones.

        The exporter's scopes repeat their parent's prefix: ``/features/features.1/conv/conv.0``
        is module ``features.1.conv.0``.
        """
        segments: list[str] = []
        for part in [p for p in node.name.split("/") if p][:-1]:
            if segments and part.startswith(segments[-1] + "."):
                segments[-1] = part
            else:
                segments.append(part)
        base = ".".join(segments).replace(".", "_")
        if not base or kind in _FUNCTIONAL:
            base = {"scale": "mul", "other": node.op_type.lower()}.get(kind, kind)
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def _is_float(self, tensor: str) -> bool:
        return tensor in self.types and self.types[tensor][2]

    def _type(self, tensor: str) -> tuple[tuple[int, ...], int, bool]:
        if tensor not in self.types or -1 in self.types[tensor][0]:
            raise GraphFormatError(
                "shape inference left this tensor's shape unknown",
                path=self.path,
                where=f"tensor '{tensor}'",
                fix="export with fixed input sizes, or give its shape with --input SHAPE",
            )
        return self.types[tensor]

    def _bytes(self, tensor: str) -> int:
        shape, itemsize, _ = self._type(tensor)
        return math.prod(shape) * itemsize

    def _numel(self, tensors) -> int:
        return sum(math.prod(self.types[t][0]) for t in tensors if t in self.types)
