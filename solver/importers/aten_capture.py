"""Capture one training step as PyTorch's own ATen-level joint forward+backward graph.

``make_fx`` traces ``loss = loss_of(model(x)); torch.autograd.grad(loss, params)`` with fake
tensors on the CPU device: no weight is allocated, and every composite ``torch.nn`` module
(``nn.TransformerEncoder``, ``nn.MultiheadAttention``, ``F.scaled_dot_product_attention``,
LSTM, functional code) is traced down to the ATen operators the CPU really runs, forward *and*
backward. The backward ops read exactly the forward tensors autograd saves for them, because
they are the very formulas autograd runs. Fake tensors on ``cpu`` (not ``meta``) matter: the
CPU's scaled-dot-product-attention choice (flash kernel vs math) decides what is saved.

Every call node of the captured graph is tagged in ``node.meta["custom"]``:

* ``phase``: ``forward`` (the model), ``loss`` (the loss function) or ``backward``;
* ``module``: the qualified name of the innermost module running (forward ops), from global
  module hooks, e.g. ``enc.layers.2.self_attn``;
* ``grad_of``: for backward ops, the autograd sequence number of the ``grad_fn`` being run
  (``None`` for gradient accumulation between ``grad_fn`` calls). The forward op with the same
  ``seq_nr`` is the one differentiated.

The loss is ``mean(output ** 2)`` for every model: it needs no labels, reads the output (as
cross-entropy does) and is what the executor and the tests reproduce. A model returning several
tensors (a tuple, list or dict, e.g. ``nn.GRU``'s ``(output, h_n)``) gets the sum of that loss
over its floating-point outputs.

Inputs are :class:`InputSpec` s, a shape and a dtype each, passed to ``forward`` in order (one
float input by default). Their values never matter to the capture (fake tensors); to run the
step for real, :func:`example_inputs` draws floats from ``randn`` and integers (token ids, class
indices) from ``randint(0, 2)``: valid for any ``nn.Embedding`` of two rows or more and any
target of two classes or more, and both values occur, so gradients are not trivially zero.
"""

from __future__ import annotations

import contextlib
import logging
import math
import operator
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from solver.errors import GraphFormatError
from solver.importers._deps import require_torch

__all__ = [
    "LOSS_SCOPE",
    "DTYPES",
    "InputSpec",
    "JointCapture",
    "as_inputs",
    "capture_joint",
    "example_inputs",
    "inputs_from_meta",
    "loss_of",
    "node_tag",
    "size_rnn_workspaces",
]

logger = logging.getLogger(__name__)

#: ``module`` tag of the loss function's ops.
LOSS_SCOPE = "<loss>"


#: Input dtypes by name (and their aliases) -> the ``torch`` attribute.
DTYPES = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int64": "int64",
    "long": "int64",
    "int32": "int32",
    "int": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}


@dataclass(frozen=True)
class InputSpec:
    """One input of the model's ``forward``: its shape (batch first) and dtype name."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def __str__(self) -> str:
        text = "x".join(str(s) for s in self.shape)
        return text if self.dtype == "float32" else f"{text}:{self.dtype}"

    @property
    def is_float(self) -> bool:
        """Whether the input holds floating-point values (drawn from ``randn``)."""
        return self.dtype.startswith(("float", "bfloat"))


def as_inputs(inputs: Any) -> tuple[InputSpec, ...]:
    """A shape (``(4, 16, 64)``: one float input) or a sequence of :class:`InputSpec`."""
    if isinstance(inputs, InputSpec):
        return (inputs,)
    items = tuple(inputs)
    if items and all(isinstance(i, InputSpec) for i in items):
        return items
    return (InputSpec(tuple(int(s) for s in items)),)


def inputs_from_meta(meta: Mapping[str, Any]) -> tuple[InputSpec, ...]:
    """The inputs a graph was imported with, from its ``meta`` (``inputs``, else the float
    ``input_shape`` of graphs imported before inputs had dtypes)."""
    if "inputs" in meta:
        return tuple(
            InputSpec(tuple(i["shape"]), i.get("dtype", "float32")) for i in meta["inputs"]
        )
    return (InputSpec(tuple(meta["input_shape"])),)


def example_inputs(torch, inputs: Any, device: Any = "cpu") -> list[Any]:
    """Real tensors for ``inputs``, drawn from the current generator (seed it first):
    ``randn`` for floats, ``randint(0, 2)`` for integers and booleans (see the module doc)."""
    tensors = []
    for spec in as_inputs(inputs):
        dtype = getattr(torch, DTYPES[spec.dtype])
        if spec.is_float:
            tensors.append(torch.randn(spec.shape, device=device).to(dtype))
        else:
            tensors.append(torch.randint(0, 2, spec.shape, device=device).to(dtype))
    return tensors


def loss_of(output: Any) -> Any:
    """The loss every imported training step uses: ``mean(output ** 2)`` (no labels needed);
    for several outputs (tuple, list, dict), the sum over the floating-point ones."""
    if hasattr(output, "float"):
        return (output.float() ** 2).mean()
    leaves = _float_leaves(output)
    if not leaves:
        raise TypeError(
            f"the model returned {type(output).__name__} without a floating-point tensor; "
            "return the tensor(s) a loss should be computed from"
        )
    total = (leaves[0].float() ** 2).mean()
    for leaf in leaves[1:]:
        total = total + (leaf.float() ** 2).mean()
    return total


def _float_leaves(output: Any) -> list[Any]:
    if isinstance(output, dict):
        return [t for v in output.values() for t in _float_leaves(v)]
    if isinstance(output, list | tuple):
        return [t for v in output for t in _float_leaves(v)]
    if hasattr(output, "is_floating_point") and output.is_floating_point():
        return [output]
    return []


@dataclass(frozen=True)
class JointCapture:
    """The captured joint graph and what is needed to run it again with real tensors.

    ``gm`` takes ``(*inputs, *params, *buffers)`` and returns ``(loss, grads)``, one gradient
    per parameter in ``param_names`` order. ``factory`` builds the model again (real weights).
    ``input_shape`` is the first input's shape; ``inputs`` all of them, with their dtypes.
    """

    name: str
    gm: Any
    factory: Callable[[], Any]
    input_shape: tuple[int, ...]
    param_names: tuple[str, ...]
    buffer_names: tuple[str, ...]
    parameters: int
    seconds: float
    meta: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[InputSpec, ...] = ()

    def __post_init__(self) -> None:
        if not self.inputs:  # one float input of input_shape, as before dtypes were known
            object.__setattr__(self, "inputs", (InputSpec(tuple(self.input_shape)),))


def node_tag(node: Any) -> dict[str, Any]:
    """The ``custom`` tags of a captured node (empty for placeholders and the output)."""
    return node.meta.get("custom") or {}


def capture_joint(
    factory: Callable[[], Any],
    input_shape: tuple[int, ...] | Sequence[InputSpec],
    *,
    name: str = "model",
) -> JointCapture:
    """Trace one training step of ``factory()`` on input ``input_shape`` with fake tensors.

    ``input_shape`` is one float input's shape, or the :class:`InputSpec` of every input.

    Raises
    ------
    MissingDependencyError
        Without torch.
    GraphFormatError
        If the model cannot be built or captured, e.g. data-dependent control flow; the
        message says where (file:line of the model code) and what to do instead.
    """
    import time

    torch = require_torch("the ATen importer")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs = as_inputs(input_shape)
    start = time.perf_counter()
    fake = FakeTensorMode()
    try:
        model = _built(torch, factory, name)
        model.train()
        params = dict(model.named_parameters())
        buffers = dict(model.named_buffers())
        with fake:  # stand-ins on the cpu device, so that cpu kernels are chosen
            args = [torch.empty(i.shape, dtype=getattr(torch, DTYPES[i.dtype])) for i in inputs]
            args += [_like(torch, p).requires_grad_(True) for p in params.values()]
            args += [_like(torch, b) for b in buffers.values()]
        step = _make_step(torch, model, tuple(params), tuple(buffers), len(inputs))
        with _module_tags(torch, model), _preserved_meta():
            gm = make_fx(step, tracing_mode="fake")(*args)
    except Exception as exc:  # noqa: BLE001 - any failure inside user code or tracing
        raise _capture_error(exc, name, inputs) from None
    sized = size_rnn_workspaces(torch, gm)
    seconds = time.perf_counter() - start
    logger.info("captured %s: %d nodes in %.2f s", name, len(gm.graph.nodes), seconds)
    return JointCapture(
        name=name,
        gm=gm,
        factory=factory,
        input_shape=inputs[0].shape,
        inputs=inputs,
        param_names=tuple(params),
        buffer_names=tuple(buffers),
        parameters=sum(math.prod(p.shape) for p in params.values()),
        seconds=seconds,
        meta={
            "importer": "ATen joint graph: make_fx of loss + autograd.grad (fake tensors, cpu)",
            "input_shape": list(inputs[0].shape),
            **({} if inputs == (InputSpec(inputs[0].shape),) else {"inputs": _inputs_meta(inputs)}),
            "batch": inputs[0].shape[0],
            "loss": "mean(output ** 2)",
            "dtype": str(torch.get_default_dtype()).removeprefix("torch."),
            **({"rnn_workspace_bytes": sized} if sized else {}),
        },
    )


def _built(torch, factory: Callable[[], Any], name: str) -> Any:
    """``factory()`` on the meta device, so no weight is ever allocated or initialised; on the
    CPU for real if its constructor reads values (RegNet computes its stage widths with
    ``torch.round(...).tolist()``, which a meta tensor cannot answer)."""
    try:
        with torch.device("meta"):
            return factory()
    except (NotImplementedError, RuntimeError) as exc:
        if "meta" not in str(exc):
            raise
        logger.info("%s reads tensor values while it is built (%s); built on the CPU", name, exc)
        return factory()


def size_rnn_workspaces(torch, gm) -> list[int]:
    """Give each oneDNN LSTM layer's workspace its real size; the bytes of each, in order.

    ``aten.mkldnn_rnn_layer`` returns a workspace that its backward reads (autograd saves it),
    but its fake kernel returns an empty tensor, so the capture would count 0 bytes for what
    is, for a layer of hidden size 64 over 8 steps of 2, 84 KiB (several times the layer's
    output). Its size is oneDNN's own layout, with no formula in PyTorch; so each distinct
    layer shape runs once here for real, on zeros of its input shapes on the CPU (the device
    the capture is for), and the workspace's captured value is replaced by a fake tensor of
    the real shape. A layer that cannot run (no oneDNN in this build) keeps 0 bytes, logged.
    """
    target = getattr(torch.ops.aten, "mkldnn_rnn_layer", None)
    if target is None:
        return []
    sizes: list[int] = []
    known: dict[tuple, tuple[tuple[int, ...], Any]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not target.default:
            continue
        val = node.meta.get("val")
        if not isinstance(val, tuple | list) or len(val) < 4:
            continue
        fake = val[3]
        signature = tuple(_signature(torch, a) for a in node.args)
        if signature not in known:
            known[signature] = _real_workspace(torch, node)
        shape, dtype = known[signature]
        if shape is None:
            sizes.append(0)
            continue
        with fake.fake_mode:
            real = torch.empty(shape, dtype=dtype, device=fake.device)
        node.meta["val"] = (*val[:3], real, *val[4:])
        for user in node.users:
            if user.target is operator.getitem and user.args[1] == 3:
                user.meta["val"] = real
        sizes.append(math.prod(shape) * dtype.itemsize)
    return sizes


def _signature(torch, arg: Any) -> Any:
    val = getattr(arg, "meta", {}).get("val") if hasattr(arg, "meta") else None
    if isinstance(val, torch.Tensor):
        return ("tensor", tuple(val.shape), str(val.dtype))
    if isinstance(arg, list | tuple):
        return tuple(_signature(torch, a) for a in arg)
    return repr(arg)


def _real_workspace(torch, node) -> tuple[tuple[int, ...] | None, Any]:
    """(shape, dtype) of the workspace the real kernel returns for ``node``'s argument shapes."""

    def real(arg):
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            return torch.zeros(val.shape, dtype=val.dtype, device="cpu")
        return val

    try:
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), real)
        workspace = node.target(*args, **kwargs)[3]  # no_grad would return no workspace
    except Exception as exc:  # noqa: BLE001 - no oneDNN here: keep the fake size, say so
        logger.warning("cannot size the LSTM workspace of %s (%s); counted as 0 bytes", node, exc)
        return None, None
    return tuple(workspace.shape), workspace.dtype


def _inputs_meta(inputs: tuple[InputSpec, ...]) -> list[dict[str, Any]]:
    return [{"shape": list(i.shape), "dtype": i.dtype} for i in inputs]


def _like(torch, tensor):
    return torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")


def _make_step(
    torch, model, param_names: tuple[str, ...], buffer_names: tuple[str, ...], n_inputs: int = 1
):
    from torch.fx import traceback as fx_traceback

    n_params = len(param_names)

    def step(*tensors):
        x, tensors = tensors[:n_inputs], tensors[n_inputs:]
        params, buffers = tensors[:n_params], tensors[n_params:]
        state = {
            **dict(zip(param_names, params, strict=True)),
            **dict(zip(buffer_names, buffers, strict=True)),
        }
        _set_tag({"phase": "forward", "module": ""})
        output = torch.func.functional_call(model, state, tuple(x))
        _set_tag({"phase": "loss", "module": LOSS_SCOPE})
        loss = loss_of(output)
        _set_tag({"phase": "backward", "grad_of": None})
        _tag_backward(loss.grad_fn)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        grads = tuple(
            torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
        )
        fx_traceback.current_meta.pop("custom", None)
        return loss, grads

    return step


def _set_tag(tag: dict[str, Any]) -> None:
    from torch.fx import traceback as fx_traceback

    fx_traceback.current_meta["custom"] = dict(tag)


def _tag_backward(root) -> None:
    """Hook every autograd node: its ops get ``grad_of`` = the node's sequence number."""
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        seq = node._sequence_nr()
        node.register_prehook(
            lambda grads, seq=seq: _set_tag({"phase": "backward", "grad_of": seq})
        )
        node.register_hook(lambda *_: _set_tag({"phase": "backward", "grad_of": None}))
        todo.extend(fn for fn, _ in node.next_functions)


@contextlib.contextmanager
def _module_tags(torch, model) -> Iterator[None]:
    """Tag forward ops with the innermost running module (global forward hooks)."""
    names = {id(module): name for name, module in model.named_modules()}
    stack: list[str] = []
    hooks = torch.nn.modules.module

    def enter(module, args):
        if id(module) in names:
            stack.append(names[id(module)])
            _set_tag({"phase": "forward", "module": stack[-1]})

    def leave(module, args, output):
        if id(module) in names and stack:
            stack.pop()
            _set_tag({"phase": "forward", "module": stack[-1] if stack else ""})

    handles = [
        hooks.register_module_forward_pre_hook(enter),
        hooks.register_module_forward_hook(leave),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def _preserved_meta() -> Iterator[None]:
    from torch.fx import traceback as fx_traceback

    with fx_traceback.preserve_node_meta():
        try:
            yield
        finally:
            fx_traceback.current_meta.pop("custom", None)


def _capture_error(
    exc: BaseException, name: str, inputs: tuple[InputSpec, ...]
) -> GraphFormatError:
    """One line: why capture failed, where in the model code, and what to do."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    where = _user_frame(exc)
    data_dependent = any(
        key in type(exc).__name__ + text
        for key in ("DataDependent", "data-dependent", "data dependent", "GuardOnDataDependent")
    )
    if data_dependent:
        why = "data-dependent control flow (a Python branch on a tensor's value)"
        fix = (
            "make the branch static (or use torch.where / torch.cond), or export the model "
            "to ONNX, which records the branch an example input takes, and import that file"
        )
    elif "more than 1 value per channel" in text:  # F.batch_norm's check in training
        size = text.partition("input size ")[2].removeprefix("torch.Size(").removesuffix(")")
        why = "a batch norm in training sees one value per channel" + (
            f" (its input is {size})" if size else ""
        )
        shape = "x".join(str(s) for s in (2, *inputs[0].shape[1:]))
        fix = (
            "a training step needs a batch of 2 or more there (a batch norm after a global "
            f"pooling, say): import with a larger batch, e.g. --input {shape}"
        )
    else:
        why = f"{type(exc).__name__}: {text}"
        given = " and ".join(_described(i) for i in inputs)
        fix = f"check that the model builds with no arguments and accepts {given}"
        if "scalar type" in text and ("Long" in text or "Int" in text):
            shape = "x".join(str(s) for s in inputs[0].shape)
            fix += f"; give integer inputs (token ids) their dtype: --input {shape}:int64"
    at = f" at {where}" if where else ""
    return GraphFormatError(f"cannot capture the training step: {why}{at}", where=name, fix=fix)


def _described(spec: InputSpec) -> str:
    """``input (4, 12)`` as before dtypes, ``input (4, 12) of int64`` otherwise."""
    return f"input {tuple(spec.shape)}" + ("" if spec.dtype == "float32" else f" of {spec.dtype}")


def _user_frame(exc: BaseException) -> str:
    """``file.py:line`` of the innermost frame outside torch and this package, if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/torch/" in path or "/solver/importers/aten" in path or path.startswith("<"):
            continue
        return f"{path.rsplit('/', 1)[-1]}:{frame.lineno}"
    return ""
