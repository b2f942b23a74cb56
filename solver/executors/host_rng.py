"""The two rules by which a step on torch draws the random numbers the reference draws.

The reference step is a plain ``loss.backward()`` on the CPU; its dropout masks come from the
CPU's generator. A step by a schedule must draw the same numbers, or its gradients differ:

1. **Drawn on the host.** A random op that runs on a GPU draws on the CPU, with the CPU's
   kernel and generator, and its result is written to the GPU (:func:`host_draw` for an ATen op,
   :func:`dropout` for a torch.fx dropout layer). A GPU's own kernel draws from the GPU's
   generator: other masks.
2. **Replayed on recomputation.** A node's first run remembers the generator state; a
   recomputation runs from that state again and restores the current one after
   (:func:`replay_rng`), so a recomputed mask equals the first one.

docs/spec-notes.md, "The PyTorch executor", says how this is checked without a GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["dropout", "host_draw", "host_dropout", "is_random", "replay_rng"]


def is_random(torch: Any, op: Any) -> bool:
    """Does ATen op ``op`` draw from a random generator (``bernoulli_`` of dropout's mask,
    ``native_dropout``, ``rand_like``, ...)? ATen tags every such op ``nondeterministic_seeded``."""
    return torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())


#: In-place random ops that only write ``self`` (its values are not read).
_FILLS = frozenset(
    ("bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_")
    + ("log_normal_", "cauchy_")
)


def host_draw(
    torch: Any, op: Any, args: Sequence[Any], kwargs: Mapping[str, Any], target: Any
) -> Any:
    """Random ATen op ``op`` drawn on the CPU, its result on torch device ``target`` (rule 1).

    The op itself runs on the CPU, on tensors of the same shape, strides and dtype as its
    arguments on ``target`` (values copied, a factory's ``device=`` the CPU), from the CPU's
    generator in the state the CPU run has at that draw: the same kernel, hence the same values
    bit for bit. An argument the op writes (``bernoulli_``'s ``self``) is written back on
    ``target`` and returned in place of its CPU copy (its values are copied in only if the op
    reads them: a fill such as ``bernoulli_`` does not); other results are copied to
    ``target``. The draw and the copies are the operation's time (on the GPU's synchronised
    clock).
    """
    cpu = torch.device("cpu")
    aten_copy = torch.ops.aten.copy_.default  # the op: Tensor.copy_ onto fake CUDA needs CUDA
    schema = op._schema.arguments
    written = {a.name for a in schema if a.alias_info is not None and a.alias_info.is_write}
    fills = op._schema.name.removeprefix("aten::") in _FILLS
    back: list[tuple[Any, Any]] = []  # (on target, on the CPU) of each written argument

    def host(value: Any, name: str) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if name not in written:
            return value.to(cpu)
        copy = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=cpu)
        if not (fills and name == "self"):
            aten_copy(copy, value)
        back.append((value, copy))
        return copy

    names = [a.name for a in schema]
    host_args = [host(v, names[j] if j < len(names) else "") for j, v in enumerate(args)]
    host_kwargs = {k: host(v, k) for k, v in kwargs.items()}
    if host_kwargs.get("device") is not None:
        host_kwargs["device"] = cpu
    result = op(*host_args, **host_kwargs)
    for on_target, on_cpu in back:
        aten_copy(on_target, on_cpu)
    originals = {id(on_cpu): on_target for on_target, on_cpu in back}

    def placed(value: Any) -> Any:
        if isinstance(value, list | tuple):
            return type(value)(placed(v) for v in value)
        if not isinstance(value, torch.Tensor):
            return value
        original = originals.get(id(value))
        return value.to(target) if original is None else original

    return placed(result)


def dropout(torch: Any, tensor: Any, p: float, training: bool, inplace: bool) -> Any:
    """A torch.fx dropout layer whose mask the CPU's generator draws, on any device: on the CPU
    the kernel itself, elsewhere :func:`host_dropout` (rule 1)."""
    if tensor.device.type == "cpu":
        return torch.nn.functional.dropout(tensor, p, training, inplace)
    return host_dropout(torch, tensor, p, training, inplace)


def host_dropout(torch: Any, tensor: Any, p: float, training: bool, inplace: bool) -> Any:
    """What the CPU's dropout kernel does (ATen's ``_dropout_impl``), its mask drawn on the CPU
    by :func:`host_draw` and applied where ``tensor`` is: ``bernoulli_(1 - p)`` on a tensor like
    the input, divided by ``1 - p``, multiplied in. Autograd saves the scaled mask, as on the
    CPU; the draw and the copy of the mask are in the layer's time."""
    if p == 0 or not training or tensor.numel() == 0:
        return tensor
    if p == 1:
        noise = torch.zeros((), dtype=tensor.dtype, device=tensor.device)
    else:
        like = torch.empty_like(tensor)
        noise = host_draw(torch, torch.ops.aten.bernoulli_.float, (like, 1 - p), {}, like.device)
        noise = noise.div_(1 - p)
    return tensor.mul_(noise) if inplace else tensor * noise


@contextlib.contextmanager
def replay_rng(torch: Any, states: dict[str, Any], gid: str) -> Iterator[None]:
    """First run of node ``gid``: remember the generator state in ``states``; recomputation:
    replay it (a recomputed dropout mask equals the first one), then restore the state
    (rule 2)."""
    if gid not in states:
        states[gid] = _rng_state(torch)
        yield
        return
    saved = _rng_state(torch)
    _set_rng_state(torch, states[gid])
    try:
        yield
    finally:
        _set_rng_state(torch, saved)


def _rng_state(torch: Any) -> tuple[Any, Any]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(torch: Any, state: tuple[Any, Any]) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
