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
  ``seq_nr`` is the one differentiated (graph-import.md, probe of the joint graph).

The loss is ``mean(output ** 2)`` for every model: it needs no labels, reads the output (as
cross-entropy does) and is what the executor and the tests reproduce.
"""

from __future__ import annotations

import contextlib
import logging
import math
import operator
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from solver.errors import GraphFormatError
from solver.importers._deps import require_torch

__all__ = [
    "LOSS_SCOPE",
    "JointCapture",
    "capture_joint",
    "loss_of",
    "node_tag",
    "size_rnn_workspaces",
]

logger = logging.getLogger(__name__)

#: ``module`` tag of the loss function's ops.
LOSS_SCOPE = "<loss>"


def loss_of(output: Any) -> Any:
    """The loss every imported training step uses: ``mean(output ** 2)`` (no labels needed)."""
    return (output.float() ** 2).mean()


@dataclass(frozen=True)
class JointCapture:
    """The captured joint graph and what is needed to run it again with real tensors.

    ``gm`` takes ``(x, *params, *buffers)`` and returns ``(loss, grads)``, one gradient per
    parameter in ``param_names`` order. ``factory`` builds the model again (real weights).
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


def node_tag(node: Any) -> dict[str, Any]:
    """The ``custom`` tags of a captured node (empty for placeholders and the output)."""
    return node.meta.get("custom") or {}


def capture_joint(
    factory: Callable[[], Any], input_shape: tuple[int, ...], *, name: str = "model"
) -> JointCapture:
    """Trace one training step of ``factory()`` on input ``input_shape`` with fake tensors.

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

    start = time.perf_counter()
    fake = FakeTensorMode()
    try:
        with torch.device("meta"):  # no weight is ever allocated or initialised
            model = factory()
        model.train()
        params = dict(model.named_parameters())
        buffers = dict(model.named_buffers())
        with fake:  # stand-ins on the cpu device, so that cpu kernels are chosen
            example = torch.empty(input_shape)
            inputs = [example, *(_like(torch, p).requires_grad_(True) for p in params.values())]
            inputs += [_like(torch, b) for b in buffers.values()]
        step = _make_step(torch, model, tuple(params), tuple(buffers))
        with _module_tags(torch, model), _preserved_meta():
            gm = make_fx(step, tracing_mode="fake")(*inputs)
    except Exception as exc:  # noqa: BLE001 - any failure inside user code or tracing
        raise _capture_error(exc, name, input_shape) from None
    sized = size_rnn_workspaces(torch, gm)
    seconds = time.perf_counter() - start
    logger.info("captured %s: %d nodes in %.2f s", name, len(gm.graph.nodes), seconds)
    return JointCapture(
        name=name,
        gm=gm,
        factory=factory,
        input_shape=tuple(input_shape),
        param_names=tuple(params),
        buffer_names=tuple(buffers),
        parameters=sum(math.prod(p.shape) for p in params.values()),
        seconds=seconds,
        meta={
            "importer": "ATen joint graph: make_fx of loss + autograd.grad (fake tensors, cpu)",
            "input_shape": list(input_shape),
            "batch": input_shape[0],
            "loss": "mean(output ** 2)",
            "dtype": str(torch.get_default_dtype()).removeprefix("torch."),
            **({"rnn_workspace_bytes": sized} if sized else {}),
        },
    )


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


def _like(torch, tensor):
    return torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")


def _make_step(torch, model, param_names: tuple[str, ...], buffer_names: tuple[str, ...]):
    from torch.fx import traceback as fx_traceback

    n_params = len(param_names)

    def step(x, *tensors):
        params, buffers = tensors[:n_params], tensors[n_params:]
        state = {
            **dict(zip(param_names, params, strict=True)),
            **dict(zip(buffer_names, buffers, strict=True)),
        }
        _set_tag({"phase": "forward", "module": ""})
        output = torch.func.functional_call(model, state, (x,))
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


def _capture_error(exc: BaseException, name: str, shape: tuple[int, ...]) -> GraphFormatError:
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
    else:
        why = f"{type(exc).__name__}: {text}"
        fix = f"check that the model builds with no arguments and accepts input {tuple(shape)}"
    at = f" at {where}" if where else ""
    return GraphFormatError(f"cannot capture the training step: {why}{at}", where=name, fix=fix)


def _user_frame(exc: BaseException) -> str:
    """``file.py:line`` of the innermost frame outside torch and this package, if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/torch/" in path or "/solver/importers/aten" in path or path.startswith("<"):
            continue
        return f"{path.rsplit('/', 1)[-1]}:{frame.lineno}"
    return ""
