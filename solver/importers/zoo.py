"""Regenerate the bundled graphs: ``python -m solver.importers.zoo --out resources/graphs/``.

Every network of :data:`~solver.importers.zoo_models.ZOO` at layer level, plus VGG16 and
ResNet-18 at op level, on a desktop ``cpu`` (Ryzen 9 7950X) + ``gpu`` (RTX 3090, PCIe 4.0 x16
both ways), with roofline costs. Nothing here depends on the date, the machine or a
measurement, so running it again gives byte-identical files.

The gpu's memory in each file is the no-rematerialization peak of that graph plus its fixed
memory, so the budget is exactly what checkpoint-all needs: every budget below it (``--budget
gpu=60%``) asks for rematerialization or offloading.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from solver.document.graph import Graph
from solver.document.graph_io import save_graph
from solver.importers.torch_fx import import_torch
from solver.optimize.bounds import no_remat_peak

__all__ = ["BUNDLED", "zoo_graph", "write_zoo", "main"]

logger = logging.getLogger(__name__)

#: (network, level) pairs shipped in resources/graphs/.
BUNDLED: tuple[tuple[str, str], ...] = (
    ("vgg16", "layer"),
    ("vgg19", "layer"),
    ("resnet18", "layer"),
    ("resnet34", "layer"),
    ("resnet50", "layer"),
    ("unet", "layer"),
    ("mobilenetv2", "layer"),
    ("transformer", "layer"),
    ("vgg16", "op"),
    ("resnet18", "op"),
)
_WHY_BATCH = {
    "unet": "batch 8 at 256x256: segmentation trains on fewer, larger images",
    "transformer": "batch 32 of 256 tokens, d_model 512, 8 heads, d_ff 2048",
}


def file_stem(name: str, level: str) -> str:
    """``vgg16`` for layer level, ``vgg16-op`` for op level."""
    return name if level == "layer" else f"{name}-{level}"


def zoo_graph(name: str, level: str = "layer") -> Graph:
    """One bundled graph, built exactly as the file in resources/graphs/ is."""
    from solver.importers.zoo_models import ZOO  # needs torch: import late

    cls, shape = ZOO[name]
    spec = f"solver.importers.zoo_models:{cls.__name__}"
    graph = import_torch(spec, shape, level=level, name=file_stem(name, level))
    peak = no_remat_peak(graph)
    gpu = graph.device("gpu")
    graph = graph.with_memory_limits({"gpu": peak + gpu.fixed_memory})
    meta = {
        **graph.meta,
        "generator": "python -m solver.importers.zoo --out resources/graphs/",
        "batch_size": _WHY_BATCH.get(name, f"batch {shape[0]} at 224x224, as in the papers"),
        "peak_no_remat": peak,
        "memory": (
            "gpu memory = no-rematerialization peak (peak_no_remat, checkpoint-all) + "
            "fixed memory, so that checkpoint-all just fits; the modelled RTX 3090 has "
            "24 GiB; cpu memory = 64 GiB of host RAM"
        ),
    }
    return replace(graph, meta=meta)


def write_zoo(out: str | Path, only: list[str] | None = None) -> list[Path]:
    """Write the bundled graphs into ``out`` (atomically, one file each); return the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, level in BUNDLED:
        if only and name not in only and file_stem(name, level) not in only:
            continue
        graph = zoo_graph(name, level)
        path = out / f"{file_stem(name, level)}.graph.json"
        save_graph(graph, path)
        logger.info("wrote %s: %d nodes", path, graph.n)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--out DIR`` (default resources/graphs), ``--only NAME ...``."""
    parser = argparse.ArgumentParser(
        prog="python -m solver.importers.zoo", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default="resources/graphs", help="output folder")
    parser.add_argument("--only", nargs="*", help="network names or file stems to write")
    args = parser.parse_args(argv)
    for path in write_zoo(args.out, args.only):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
