"""The operator list every importer produces, and the per-operator facts of autograd.

Both front ends (torch.fx and ONNX) reduce a network to the same :class:`OpGraph`: forward
compute operators in topological order, views already folded into their producers, with output
bytes, FLOPs and parameter counts. Everything after that (costs, layer fusion, the training
graph) works on this list only, so both importers give the same graph for the same network.

What a backward operator reads (:data:`SAVES`) is what PyTorch's autograd saves for it;
``tests/solver/importers`` checks the table against autograd itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SAVES",
    "FUSABLE",
    "BACKWARD_FLOP_FACTOR",
    "Op",
    "OpGraph",
    "TorchSource",
    "conv_flops",
    "conv_transpose_flops",
    "elementwise_flops",
]

#: kind -> which forward tensors autograd keeps for the backward: "input" (activation inputs),
#: "output" (the op's own output, or a tensor it makes alongside: max-pool indices, dropout mask).
SAVES: dict[str, frozenset[str]] = {
    "conv": frozenset({"input"}),
    "conv_transpose": frozenset({"input"}),
    "linear": frozenset({"input"}),
    "matmul": frozenset({"input"}),
    "batch_norm": frozenset({"input"}),
    "layer_norm": frozenset({"input"}),
    "relu": frozenset({"output"}),
    "relu6": frozenset({"input"}),  # hardtanh_backward(grad, self, 0, 6)
    "gelu": frozenset({"input"}),
    "silu": frozenset({"input"}),
    "sigmoid": frozenset({"output"}),
    "tanh": frozenset({"output"}),
    "softmax": frozenset({"output"}),
    "max_pool": frozenset({"input", "output"}),  # input + the indices made with the output
    "avg_pool": frozenset({"input"}),
    "adaptive_avg_pool": frozenset({"input"}),
    "global_avg_pool": frozenset(),  # adaptive pooling to 1x1 is a mean: keeps only sizes
    "mean": frozenset(),
    "dropout": frozenset({"output"}),  # the mask made with the output
    "add": frozenset(),
    "scale": frozenset(),  # multiplication by a constant
    "mul": frozenset({"input"}),
    "cat": frozenset(),
    "other": frozenset({"input"}),  # unknown: assume it keeps its inputs, like most ops
}

#: Kinds folded into a sole producer at layer level (normalisation, activation, dropout).
FUSABLE = frozenset(
    {
        "batch_norm",
        "layer_norm",
        "relu",
        "relu6",
        "gelu",
        "silu",
        "sigmoid",
        "tanh",
        "softmax",
        "dropout",
    }
)

#: Backward FLOPs / forward FLOPs per kind: GEMM-like ops compute two products (grad of input,
#: grad of weight); normalisations recompute statistics; the rest is one elementwise pass.
BACKWARD_FLOP_FACTOR: dict[str, float] = {
    "conv": 2.0,
    "conv_transpose": 2.0,
    "linear": 2.0,
    "matmul": 2.0,
    "batch_norm": 1.5,
    "layer_norm": 1.5,
}


@dataclass(frozen=True)
class Op:
    """One forward compute operator.

    ``inputs`` names the producing ops of its activation inputs, in argument order; ``None``
    stands for a graph input (the image, which has no gradient). ``input_bytes`` is aligned
    with ``inputs``. ``extra_bytes`` are tensors made alongside the output and kept for the
    backward (max-pool indices, dropout mask).
    """

    name: str
    kind: str
    inputs: tuple[str | None, ...]
    input_bytes: tuple[int, ...]
    shape: tuple[int, ...]
    itemsize: int
    flops: float = 0.0
    params: int = 0
    extra_bytes: int = 0
    label: str = ""

    @property
    def output_bytes(self) -> int:
        """Bytes of the output tensor: elements x dtype size."""
        return math.prod(self.shape) * self.itemsize

    @property
    def saves(self) -> frozenset[str]:
        """What autograd keeps for this op's backward (see :data:`SAVES`)."""
        return SAVES.get(self.kind, SAVES["other"])

    @property
    def grad_bytes(self) -> int:
        """Bytes of the gradients the backward produces: one per distinct op input.

        Zero when every input is a graph input (the first convolution); for ``add`` the input
        gradients alias the incoming gradient, so it is one tensor.
        """
        sized = dict(zip(self.inputs, self.input_bytes, strict=True))
        sized.pop(None, None)
        if not sized:
            return 0
        if self.kind == "add":
            return self.output_bytes
        return sum(sized.values())

    @property
    def param_bytes(self) -> int:
        """Bytes of the parameters (weights, biases), assumed in the activation dtype."""
        return self.params * self.itemsize

    @property
    def bytes_accessed(self) -> int:
        """Forward memory traffic for the roofline: inputs + output + parameters."""
        return sum(self.input_bytes) + self.output_bytes + self.extra_bytes + self.param_bytes

    @property
    def backward_flops(self) -> float:
        """Modelled backward FLOPs; a GEMM with no input gradient computes one product only."""
        factor = BACKWARD_FLOP_FACTOR.get(self.kind, 1.0)
        if factor == 2.0 and not self.grad_bytes:
            factor = 1.0
        return factor * self.flops

    @property
    def backward_bytes(self) -> int:
        """Backward traffic: incoming gradient, saved tensors read, input grads and weight grads."""
        saved = self.output_bytes + self.extra_bytes if "output" in self.saves else self.extra_bytes
        if "input" in self.saves:
            saved += sum(self.input_bytes)
        return self.output_bytes + saved + self.grad_bytes + 2 * self.param_bytes


@dataclass(frozen=True)
class TorchSource:
    """How to build the traced network again, with real weights, for measuring it."""

    factory: Callable[[], Any]
    input_shape: tuple[int, ...]


@dataclass(frozen=True)
class OpGraph:
    """A network as forward operators in topological order, plus what the importer knew.

    ``source`` is whatever a measuring cost model needs to run the network again (for torch: a
    factory and the input shape); it is never written to a file.
    """

    name: str
    ops: tuple[Op, ...]
    input_shape: tuple[int, ...]
    parameters: int
    itemsize: int = 4
    meta: dict[str, Any] = field(default_factory=dict)
    source: Any = None

    def op(self, name: str) -> Op:
        """The op called ``name``."""
        return next(op for op in self.ops if op.name == name)

    @property
    def output(self) -> Op:
        """The last op (the network's output, which feeds the loss)."""
        return self.ops[-1]

    def users(self) -> dict[str, list[str]]:
        """Op name -> names of the ops that consume its output, in order."""
        result: dict[str, list[str]] = {op.name: [] for op in self.ops}
        for op in self.ops:
            for source in dict.fromkeys(op.inputs):
                if source is not None:
                    result[source].append(op.name)
        return result


def conv_flops(out_shape: Sequence[int], cin: int, groups: int, kernel: Sequence[int]) -> float:
    """FLOPs of a convolution, multiply-add = 2, bias not counted (as FlopCounterMode).

    ``2 * N * C_out * prod(spatial_out) * (C_in / groups) * prod(kernel)``.

    Examples
    --------
    >>> conv_flops((1, 64, 112, 112), 3, 1, (7, 7)) / 1e6
    236.027904
    """
    return 2.0 * math.prod(out_shape) * (cin // groups) * math.prod(kernel)


def conv_transpose_flops(
    in_shape: Sequence[int], cout: int, groups: int, kernel: Sequence[int]
) -> float:
    """FLOPs of a transposed convolution: ``2 * numel(input) * (C_out / groups) * prod(kernel)``."""
    return 2.0 * math.prod(in_shape) * (cout // groups) * math.prod(kernel)


def elementwise_flops(kind: str, out_numel: int, in_numel: int, kernel: int = 1) -> float:
    """FLOPs of the non-GEMM kinds (rough: they are bandwidth bound, bytes decide their time).

    BN in training mode ~8 per element (statistics and normalisation), layer norm the same,
    softmax ~5, GELU ~8, pooling = window size per output, reductions one per input element,
    cat and views none, other elementwise ops one per element.
    """
    per_element = {
        "batch_norm": 8,
        "layer_norm": 8,
        "softmax": 5,
        "gelu": 8,
        "silu": 4,
        "sigmoid": 4,
        "tanh": 4,
        "cat": 0,
    }
    if kind in ("max_pool", "avg_pool"):
        return float(out_numel * kernel)
    if kind in ("adaptive_avg_pool", "global_avg_pool", "mean"):
        return float(in_numel)
    return float(out_numel * per_element.get(kind, 1))
