"""Import a PyTorch module: torch.fx ``symbolic_trace`` + ``ShapeProp`` on the meta device.

The model is built under ``torch.device("meta")``, so no weight is allocated and shape
propagation at batch 256 takes well under a second. Views (flatten,
reshape, getitem, ...) get no node: they are folded into the op that produced their input.

Spec strings name a module and an attribute, ``"package.module:Class"`` or
``"path/to/file.py:make_model"``; the attribute is called with no arguments.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import logging
import math
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from solver.document.graph import Graph
from solver.errors import GraphFormatError
from solver.importers._deps import require_torch
from solver.importers.assemble import assemble_graph
from solver.importers.costmodel import CostModel, resolve_cost_models
from solver.importers.fx_ops import VIEW, node_flops, node_kind, node_params, tensor_metas
from solver.importers.hardware import DeviceSpec, Platform, make_platform
from solver.importers.ops import Op, OpGraph, TorchSource
from solver.importers.user_code import user_code

__all__ = ["load_factory", "model_label", "trace_ops", "import_torch"]

logger = logging.getLogger(__name__)
_TRACE_ERRORS = (
    TypeError,
    ValueError,
    RuntimeError,
    NotImplementedError,
    AttributeError,
    IndexError,
    KeyError,
    AssertionError,
)


def load_factory(spec: str) -> Callable[[], Any]:
    """Return the callable named by ``"module:Attr"`` (a dotted module or a ``.py`` path).

    Raises
    ------
    GraphFormatError
        If the spec is malformed, the module cannot be imported or has no such attribute.
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise GraphFormatError(
            f"{spec!r} is not 'module:Class'",
            where="model spec",
            fix="write e.g. mypackage.models:Net or path/to/net.py:Net",
        )
    try:
        with user_code(spec, "importing the module", passing=(ImportError, OSError, SyntaxError)):
            module = _import(module_name)
    except (ImportError, OSError, SyntaxError) as exc:
        raise GraphFormatError(
            f"cannot import {module_name!r}: {exc}",
            where="model spec",
            fix="check the module path and that it imports cleanly",
        ) from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise GraphFormatError(
                f"{module_name!r} has no attribute {attr!r}",
                where="model spec",
                fix="name a class or a function",
            ) from None
        target = getattr(target, part)
    if not callable(target):
        raise GraphFormatError(
            f"{attr!r} is not callable",
            where="model spec",
            fix="name an nn.Module class or a function returning one",
        )
    return target


def model_label(spec: Any, factory: Callable[[], Any]) -> str:
    """The model as messages name it: its spec, or the factory's module and name."""
    if isinstance(spec, str):
        return spec
    return f"{getattr(factory, '__module__', 'model')}:{getattr(factory, '__qualname__', '')}"


def _import(module_name: str) -> Any:
    """The module ``module_name`` names: a ``.py`` path or any importable module. torchvision,
    where it is installed, is made importable first (:mod:`solver.importers.torchvision_models`:
    its model definitions without its C extension), for the model code and what it imports
    (``transformers`` imports torchvision where it finds it)."""
    from solver.importers.torchvision_models import prepare_torchvision

    prepare_torchvision()
    if module_name.endswith(".py"):
        return _load_file(Path(module_name))
    return importlib.import_module(module_name)


def _load_file(path: Path):
    if not path.is_file():
        raise ImportError(f"no file {path}")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(path.stem, module)
    spec.loader.exec_module(module)
    return module


def trace_ops(
    factory: Callable[[], Any], input_shape: tuple[int, ...], *, name: str = "model"
) -> OpGraph:
    """Trace the module ``factory()`` builds and return its forward ops, views folded.

    Raises
    ------
    MissingDependencyError
        Without torch.
    GraphFormatError
        If the module cannot be built on the meta device, traced or shape-propagated.
    """
    torch = require_torch("the torch.fx importer")
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        with torch.device("meta"):
            model = factory()
        model.train()
        gm = torch.fx.symbolic_trace(model)
        with contextlib.redirect_stderr(io.StringIO()):  # ShapeProp prints a traceback
            ShapeProp(gm).propagate(torch.empty(input_shape, device="meta"))
    except (*_TRACE_ERRORS, torch.fx.proxy.TraceError) as exc:
        raise GraphFormatError(
            f"cannot trace the model: {_one_line(exc)}",
            where=name,
            fix="forward must be symbolically traceable by torch.fx "
            "(no data-dependent control flow) and accept input "
            f"{tuple(input_shape)}; or export it to ONNX",
        ) from None
    ops = _ops_from_graph_module(gm)
    if not ops:
        raise GraphFormatError(
            "the model has no compute operator", where=name, fix="check the module's forward"
        )
    itemsize = ops[-1].itemsize
    return OpGraph(
        name=name,
        ops=tuple(ops),
        input_shape=tuple(input_shape),
        parameters=sum(p.numel() for p in model.parameters()),
        itemsize=itemsize,
        meta={
            "importer": "torch.fx symbolic_trace + ShapeProp (meta device)",
            "input_shape": list(input_shape),
            "batch": input_shape[0],
            "dtype": str(torch.get_default_dtype()).removeprefix("torch."),
        },
        source=TorchSource(factory, tuple(input_shape)),
    )


def _one_line(exc: BaseException) -> str:
    """The root cause in one line, with the fx node ShapeProp was at, if any."""
    node = re.search(r"node=%(\w+)", str(exc))
    cause = exc.__cause__ or exc
    text = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return f"{text} (at node {node.group(1)})" if node else text


def _ops_from_graph_module(gm) -> list[Op]:
    """Walk the fx graph in order; map every tensor node to the op whose output it is."""
    modules = dict(gm.named_modules())
    producer: dict[str, str | None] = {}  # fx node -> op name (None: a graph input)
    ops: list[Op] = []
    for node in gm.graph.nodes:
        metas = tensor_metas(node)
        if node.op == "placeholder":
            producer[node.name] = None
            continue
        if node.op in ("output", "get_attr") or not metas:
            continue
        module = modules.get(node.target) if node.op == "call_module" else None
        kind = node_kind(node, module)
        args = [a for a in node.all_input_nodes if a.name in producer]
        if kind == VIEW:
            producer[node.name] = producer[args[0].name] if args else None
            continue
        producer[node.name] = node.name
        ops.append(_make_op(node, kind, module, gm, args, producer, metas))
    return ops


def _make_op(node, kind, module, gm, args, producer, metas) -> Op:
    sizes = [math.prod(m.shape) * m.dtype.itemsize for m in metas]
    first = metas[0]
    numel = math.prod(first.shape)
    extra = sum(sizes[1:])
    if kind == "max_pool":
        extra += numel * 8  # int64 indices kept for the backward
    elif kind == "dropout":
        extra += numel  # the bool mask of the fused CUDA kernel (CPU keeps a float mask)
    return Op(
        name=node.name,
        kind=kind,
        inputs=tuple(producer[a.name] for a in args),
        input_bytes=tuple(_bytes(a) for a in args),
        shape=tuple(first.shape),
        itemsize=first.dtype.itemsize,
        flops=node_flops(node, kind, module),
        params=node_params(node, module, gm),
        extra_bytes=extra,
        label=type(module).__name__
        if module is not None
        else str(getattr(node.target, "__name__", node.target)),
    )


def _bytes(node) -> int:
    return sum(math.prod(m.shape) * m.dtype.itemsize for m in tensor_metas(node))


def import_torch(
    spec: str | Callable[[], Any],
    input_shape: tuple[int, ...],
    *,
    level: str = "layer",
    devices: Platform | Mapping[str, str | DeviceSpec] | None = None,
    cost_model: str | CostModel | Mapping[str, CostModel] | None = "roofline",
    name: str | None = None,
) -> Graph:
    """Import a PyTorch module as a training graph.

    Parameters
    ----------
    spec
        ``"module:Class"`` (or a ``.py`` path before the colon), or a callable returning the
        module. It is built with no arguments, on the meta device.
    input_shape
        Shape of the (float) input, batch first, e.g. ``(32, 3, 224, 224)``.
    level
        ``"layer"`` (conv+BN+activation fused; default) or ``"op"``.
    devices
        A :class:`Platform`, or graph device names mapped to spec keys of
        :data:`solver.importers.hardware.DEVICES`. Default: ``cpu`` = Ryzen 9 7950X,
        ``gpu`` = RTX 3090, PCIe 4.0 x16 both ways.
    cost_model
        ``"roofline"`` (default), ``"measured"`` (CPU devices timed on this machine), a
        :class:`CostModel` for all devices, or a mapping per device name.
    name
        Graph name; defaults to the class name in lower case.

    Returns
    -------
    Graph
        Forward nodes, a ``loss`` node and backward nodes, validated.

    Raises
    ------
    MissingDependencyError
        If torch is not installed (``pip install -e .[torch]``).
    GraphFormatError
        If the spec, the module or a device name is unusable.
    """
    factory = load_factory(spec) if isinstance(spec, str) else spec
    label = spec if isinstance(spec, str) else getattr(spec, "__qualname__", repr(spec))
    name = name or getattr(factory, "__name__", "model").lower()
    platform = devices if isinstance(devices, Platform) else make_platform(devices)
    models = resolve_cost_models(cost_model, platform)
    with user_code(model_label(spec, factory), "tracing it"):
        ops = trace_ops(factory, tuple(input_shape), name=name)
    logger.info("traced %s: %d ops, %d parameters", name, len(ops.ops), ops.parameters)
    ops = OpGraph(
        ops.name,
        ops.ops,
        ops.input_shape,
        ops.parameters,
        ops.itemsize,
        {"source": label, **ops.meta},
        ops.source,
    )
    return assemble_graph(ops, platform, models, level=level)
