"""Import an ONNX file (XEngine's own input format) with ``onnx`` and its shape inference.

No onnxruntime: ``onnx.shape_inference.infer_shapes`` gives every intermediate shape, which is
all the graph needs. The walk mirrors the torch.fx importer, so an
exported network gives the same :class:`~solver.importers.ops.OpGraph`:

* *static* tensors (weights given as graph inputs or initializers, ``Constant``, shape
  arithmetic, anything computed only from those) get no node;
* views (``Flatten``, ``Reshape``, ``Transpose``, ``Squeeze``, ...) fold into their producer,
  and so does a bias ``Add`` after a ``MatMul`` (``Linear`` on 3-D input is exported that way);
* a ``MatMul`` or ``Gemm`` with a static operand is a ``linear``, with two activations a
  ``matmul``; ``Clip`` is ReLU6; training-mode ``Dropout`` and ``BatchNormalization`` as in torch.

Export a PyTorch model for it with ``torch.onnx.export(model, args, path, dynamo=False,
export_params=False, training=TrainingMode.TRAINING, do_constant_folding=False)``: the file is
weight-free (kilobytes) and keeps BN and dropout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from solver.document.graph import Graph
from solver.errors import GraphFormatError
from solver.importers._deps import require_onnx
from solver.importers.assemble import assemble_graph
from solver.importers.costmodel import CostModel, resolve_cost_models
from solver.importers.hardware import DeviceSpec, Platform, make_platform
from solver.importers.onnx_checks import check_input_shape, check_modelable, read_onnx
from solver.importers.onnx_walk import OnnxWalker, tensor_types
from solver.importers.ops import OpGraph

__all__ = ["onnx_ops", "import_onnx"]


def onnx_ops(
    path: str | os.PathLike, *, input_shape: tuple[int, ...] | None = None, name: str | None = None
) -> OpGraph:
    """Read ``path`` and return its forward ops (views and static subgraphs folded).

    ``input_shape`` overrides the shape of the first graph input (e.g. another batch size).

    Raises
    ------
    MissingDependencyError
        Without the ``onnx`` package.
    GraphFormatError
        If the file cannot be read, is not ONNX, has an operator that cannot be modelled
        (:mod:`solver.importers.onnx_checks`), or shapes cannot be inferred.
    """
    onnx = require_onnx("the ONNX importer")
    model = read_onnx(onnx, Path(path))
    check_modelable(onnx, model, str(path))  # as exported: a new batch size shows in shapes
    data = model.graph.input[0]
    if input_shape is not None:
        dims = data.type.tensor_type.shape.dim
        if len(dims) != len(input_shape):
            raise GraphFormatError(
                f"input has {len(dims)} dimensions, not {len(input_shape)}",
                path=str(path),
                where=f"input '{data.name}'",
                fix="give a shape of the right rank",
            )
        check_input_shape(input_shape, _itemsize(onnx, data), str(path))
        for dim, size in zip(dims, input_shape, strict=True):
            dim.Clear()
            dim.dim_value = size
    try:  # shapes computed in-graph
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as exc:  # noqa: BLE001 - onnx's C++ errors share no Python base class
        raise GraphFormatError(
            f"shape inference failed: {' '.join(str(exc).split())[:300]}",
            path=str(path),
            fix="re-export the model with fixed input sizes",
        ) from None
    types = tensor_types(onnx, model)
    walker = OnnxWalker(model.graph, types, data.name, str(path))
    ops = walker.walk()
    shape = tuple(types[data.name][0]) if data.name in types else ()
    return OpGraph(
        name=name or Path(path).name.removesuffix(".onnx"),
        ops=tuple(ops),
        input_shape=shape,
        parameters=walker.parameters(),
        itemsize=ops[-1].itemsize,
        meta={
            "importer": "onnx + onnx.shape_inference",
            "input_shape": list(shape),
            "batch": shape[0] if shape else 1,
            "dtype": "float32",
        },
    )


def _itemsize(onnx, value_info) -> int:
    elem_type = value_info.type.tensor_type.elem_type
    return onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize if elem_type else 4


def import_onnx(
    path: str | os.PathLike,
    *,
    level: str = "layer",
    devices: Platform | Mapping[str, str | DeviceSpec] | None = None,
    cost_model: str | CostModel | Mapping[str, CostModel] | None = "roofline",
    input_shape: tuple[int, ...] | None = None,
    name: str | None = None,
) -> Graph:
    """Import an ONNX file as a training graph (same rules as :func:`import_torch`).

    Costs come from the roofline: an ONNX file cannot be run backward without torch, so
    ``cost_model="measured"`` raises :class:`GraphFormatError`.
    """
    platform = devices if isinstance(devices, Platform) else make_platform(devices)
    models = resolve_cost_models(cost_model, platform)
    ops = onnx_ops(path, input_shape=input_shape, name=name)
    ops = OpGraph(
        ops.name,
        ops.ops,
        ops.input_shape,
        ops.parameters,
        ops.itemsize,
        {"source": Path(path).name, **ops.meta},
    )
    try:
        return assemble_graph(ops, platform, models, level=level)
    except GraphFormatError as exc:  # e.g. sizes beyond what a graph file may hold
        raise exc.with_path(str(path)) if exc.path is None else exc from None
