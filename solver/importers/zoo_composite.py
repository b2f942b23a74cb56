"""Models built from composite ``torch.nn`` modules, imported through the ATen joint graph.

The torch.fx importer sees ``nn.TransformerEncoder`` or ``nn.MultiheadAttention`` as one opaque
leaf; these models are what the ATen importer (:mod:`solver.importers.aten`) is for, and two of
them are bundled: ``python -m solver.importers.zoo_composite --out resources/graphs`` writes
``encoder-aten.graph.json`` and ``attention-aten.graph.json`` (roofline costs on the default
desktop, gpu memory = the no-rematerialization peak + fixed memory, as the zoo's files), so
running it again gives identical files.

The classes can be defined without torch; instantiating one without it raises
:class:`MissingDependencyError`.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from solver.importers._deps import require_torch

try:  # optional extra: the classes below only need it when instantiated
    import torch
    from torch import nn
    from torch.nn import functional as F
except ModuleNotFoundError:  # pragma: no cover - exercised in a subprocess test
    torch = nn = F = None

__all__ = [
    "COMPOSITE",
    "BUNDLED_ATEN",
    "EncoderNet",
    "AttentionNet",
    "GroupedConvNet",
    "SdpaNet",
    "LstmNet",
    "write_aten_graphs",
    "main",
]

logger = logging.getLogger(__name__)
_Module = nn.Module if nn is not None else object


class _Net(_Module):
    def __init__(self) -> None:
        require_torch("the composite models")
        super().__init__()


class EncoderNet(_Net):
    """``nn.TransformerEncoder``: a 64 -> 256 input projection, 4 layers of
    ``nn.TransformerEncoderLayer(256, 8, 1024)`` (post-norm, dropout 0.1), a 10-way head.
    Input ``(batch, sequence, 64)``; the issue's example is 8x128x64."""

    def __init__(self, d_in: int = 64, d_model: int = 256, heads: int = 8, layers: int = 4):
        super().__init__()
        self.embed = nn.Linear(d_in, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, 10)

    def forward(self, x):
        return self.head(self.enc(self.embed(x)))


class _MhaBlock(_Net):
    """Pre-norm block: ``x + MHA(LN(x))``, then ``x + MLP(LN(x))`` with GELU."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, heads, dropout=0.1, batch_first=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.fc1, self.act = nn.Linear(d_model, 4 * d_model), nn.GELU()
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class AttentionNet(_Net):
    """Three pre-norm ``nn.MultiheadAttention`` blocks (d_model 256, 8 heads) and a head.
    Input ``(batch, sequence, 256)``."""

    def __init__(self, d_model: int = 256, heads: int = 8, blocks: int = 3):
        super().__init__()
        self.blocks = nn.Sequential(*(_MhaBlock(d_model, heads) for _ in range(blocks)))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 10)

    def forward(self, x):
        return self.head(self.norm(self.blocks(x)))


class GroupedConvNet(_Net):
    """Grouped and depthwise-separable convolutions (ResNeXt / MobileNet style) with BN.
    Input ``(batch, 3, H, W)``."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1), nn.BatchNorm2d(width), nn.ReLU())
        self.grouped = nn.Sequential(
            nn.Conv2d(width, 2 * width, 3, 1, 1, groups=4), nn.BatchNorm2d(2 * width), nn.ReLU()
        )
        self.depthwise = nn.Sequential(
            nn.Conv2d(2 * width, 2 * width, 3, 2, 1, groups=2 * width), nn.BatchNorm2d(2 * width)
        )
        self.pointwise = nn.Sequential(nn.Conv2d(2 * width, 4 * width, 1), nn.ReLU6())
        self.head = nn.Linear(4 * width, 10)

    def forward(self, x):
        x = self.pointwise(self.depthwise(self.grouped(self.stem(x))))
        return self.head(x.mean(dim=(2, 3)))


class SdpaNet(_Net):
    """Functional attention: packed q/k/v projection and ``F.scaled_dot_product_attention``
    (causal, no dropout: the CPU runs its flash kernel). Input ``(batch, sequence, 128)``."""

    def __init__(self, d_model: int = 128, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.norm(x + self.out(context.transpose(1, 2).reshape(b, s, d)))


class LstmNet(_Net):
    """A two-layer ``nn.LSTM`` (hidden 64) and a linear head. Input ``(batch, sequence, 32)``."""

    def __init__(self, d_in: int = 32, hidden: int = 64):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


#: name -> (class, input shape of the bundled graph / the issue's example)
COMPOSITE: dict[str, tuple[type, tuple[int, ...]]] = {
    "encoder": (EncoderNet, (8, 128, 64)),
    "attention": (AttentionNet, (8, 128, 256)),
    "grouped-conv": (GroupedConvNet, (8, 3, 64, 64)),
    "sdpa": (SdpaNet, (8, 128, 128)),
    "lstm": (LstmNet, (8, 32, 32)),
}

#: Networks shipped in resources/graphs/ as ``<name>-aten.graph.json`` (layer level).
BUNDLED_ATEN = ("encoder", "attention")


def aten_graph(name: str):
    """One bundled ATen graph, built exactly as the file in resources/graphs/ is."""
    from solver.importers.aten import import_aten
    from solver.optimize.bounds import no_remat_peak

    cls, shape = COMPOSITE[name]
    spec = f"solver.importers.zoo_composite:{cls.__name__}"
    graph = import_aten(spec, shape, level="layer", name=f"{name}-aten")
    peak = no_remat_peak(graph)
    graph = graph.with_memory_limits({"gpu": peak + graph.device("gpu").fixed_memory})
    meta = {
        **graph.meta,
        "generator": "python -m solver.importers.zoo_composite --out resources/graphs/",
        "peak_no_remat": peak,
        "memory": "gpu memory = no-rematerialization peak + fixed memory (checkpoint-all just "
        "fits); cpu memory = 64 GiB of host RAM",
        "execute": f"main.py execute {spec} --input {'x'.join(map(str, shape))} "
        "--schedule FILE --device-map gpu=cpu",
    }
    meta.pop("capture_seconds", None)  # machine-dependent: keep regenerated files identical
    return replace(graph, meta=meta)


def write_aten_graphs(out: str | Path) -> list[Path]:
    """Write the bundled ATen graphs into ``out`` (atomically); return the paths."""
    from solver.document.graph_io import save_graph

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in BUNDLED_ATEN:
        path = out / f"{name}-aten.graph.json"
        save_graph(aten_graph(name), path)
        logger.info("wrote %s", path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--out DIR`` (default resources/graphs)."""
    parser = argparse.ArgumentParser(
        prog="python -m solver.importers.zoo_composite", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default="resources/graphs", help="output folder")
    args = parser.parse_args(argv)
    for path in write_aten_graphs(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
