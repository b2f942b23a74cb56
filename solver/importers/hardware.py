"""Published specifications of devices and host links, for the roofline cost model.

Peak numbers are vendor figures for dense FP32 without tensor cores;
nobody reaches a peak, so each entry carries efficiency knobs (the fraction of peak FLOP/s and
of peak bandwidth a real framework gets) that a user with the device can calibrate from one
measured training step. A :class:`Platform` names the devices of a graph and the link between
every pair of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from solver.document.graph import Device, Link
from solver.errors import GraphFormatError

__all__ = ["DeviceSpec", "LinkSpec", "Platform", "DEVICES", "LINKS", "make_platform"]

GiB = 1024**3


@dataclass(frozen=True)
class DeviceSpec:
    """A device model: peak FP32 FLOP/s, memory bandwidth (bytes/s), memory, and efficiencies.

    ``launch_ms`` is the fixed cost of one operator (kernel launch, framework dispatch).
    """

    key: str
    kind: str
    label: str
    peak_flops: float
    mem_bandwidth: float
    memory: int
    compute_efficiency: float
    memory_efficiency: float
    launch_ms: float
    source: str = ""

    def with_efficiency(
        self, compute: float | None = None, memory: float | None = None
    ) -> DeviceSpec:
        """A copy with other efficiency knobs (fractions of peak in (0, 1])."""
        compute = self.compute_efficiency if compute is None else compute
        memory = self.memory_efficiency if memory is None else memory
        for value in (compute, memory):
            if not 0 < value <= 1:
                raise ValueError(f"efficiency {value} is not in (0, 1]")
        return replace(self, compute_efficiency=compute, memory_efficiency=memory)


@dataclass(frozen=True)
class LinkSpec:
    """A host link, per direction: peak bandwidth (bytes/s), latency, achievable fraction."""

    key: str
    label: str
    bandwidth: float
    latency_ms: float
    efficiency: float = 0.8

    @property
    def effective_bandwidth(self) -> float:
        """Bandwidth a copy really gets (bytes/s)."""
        return self.bandwidth * self.efficiency


_SPECS = [
    DeviceSpec(
        "ryzen-9-7950x",
        "cpu",
        "AMD Ryzen 9 7950X (16 cores, DDR5-5200 x2)",
        2.3e12,
        83.2e9,
        64 * GiB,
        0.5,
        0.7,
        0.002,
        "16 cores x 32 FP32 FLOP/cycle x 4.5 GHz base; dual-channel DDR5-5200; 64 GiB host",
    ),
    DeviceSpec(
        "rtx-3090",
        "gpu",
        "NVIDIA GeForce RTX 3090",
        35.6e12,
        936e9,
        24 * GiB,
        0.6,
        0.8,
        0.005,
        "NVIDIA launch figures: 35.6 TFLOP/s FP32, 936 GB/s, 24 GB",
    ),
    DeviceSpec(
        "v100-sxm2",
        "gpu",
        "NVIDIA V100 SXM2 16 GB",
        15.7e12,
        900e9,
        16 * GiB,
        0.6,
        0.8,
        0.005,
        "NVIDIA V100 datasheet: 15.7 TFLOP/s FP32, 900 GB/s HBM2",
    ),
    DeviceSpec(
        "a100-sxm4-40gb",
        "gpu",
        "NVIDIA A100 SXM4 40 GB",
        19.5e12,
        1555e9,
        40 * GiB,
        0.6,
        0.8,
        0.005,
        "NVIDIA A100 datasheet: 19.5 TFLOP/s FP32, 1,555 GB/s HBM2",
    ),
    DeviceSpec(
        "h100-sxm",
        "gpu",
        "NVIDIA H100 SXM 80 GB",
        67e12,
        3.35e12,
        80 * GiB,
        0.6,
        0.8,
        0.005,
        "NVIDIA H100 datasheet: 67 TFLOP/s FP32, 3.35 TB/s HBM3",
    ),
    DeviceSpec(
        "h200-sxm",
        "gpu",
        "NVIDIA H200 SXM 141 GB",
        67e12,
        4.8e12,
        141 * 1000**3,
        0.6,
        0.8,
        0.005,
        "NVIDIA H200: GH100 compute (67 TFLOP/s FP32), 4.8 TB/s HBM3e",
    ),
]
#: Device models by key.
DEVICES: dict[str, DeviceSpec] = {spec.key: spec for spec in _SPECS}

#: Host links (PCIe x16, one direction, 128b/130b encoding) by key.
LINKS: dict[str, LinkSpec] = {
    "pcie3-x16": LinkSpec("pcie3-x16", "PCIe 3.0 x16", 15.75e9, 0.01),
    "pcie4-x16": LinkSpec("pcie4-x16", "PCIe 4.0 x16", 31.5e9, 0.01),
    "pcie5-x16": LinkSpec("pcie5-x16", "PCIe 5.0 x16", 63e9, 0.01),
}


@dataclass(frozen=True)
class Platform:
    """The devices of a graph, by the name used in the graph, and the link joining them."""

    devices: tuple[tuple[str, DeviceSpec], ...]
    link: LinkSpec

    def graph_devices(self, fixed_memory: int = 0) -> tuple[Device, ...]:
        """Graph devices with their memory, peaks and ``fixed_memory`` (weights + gradients)."""
        return tuple(
            Device(name, spec.kind, spec.memory, fixed_memory, spec.peak_flops, spec.mem_bandwidth)
            for name, spec in self.devices
        )

    def graph_links(self) -> tuple[Link, ...]:
        """One link each way between every pair of devices, at the effective bandwidth."""
        names = [name for name, _ in self.devices]
        return tuple(
            Link(a, b, self.link.effective_bandwidth, self.link.latency_ms)
            for a in names
            for b in names
            if a != b
        )


def make_platform(
    devices: Mapping[str, str | DeviceSpec] | None = None, link: str | LinkSpec = "pcie4-x16"
) -> Platform:
    """Build a :class:`Platform` from graph device names to spec keys (or specs).

    The default is a desktop: ``cpu`` = Ryzen 9 7950X, ``gpu`` = RTX 3090 on PCIe 4.0 x16.

    Raises
    ------
    GraphFormatError
        For an unknown device or link key; the message lists the known ones.

    Examples
    --------
    >>> p = make_platform({"host": "ryzen-9-7950x", "card": "v100-sxm2"}, "pcie3-x16")
    >>> [(d.name, d.kind) for d in p.graph_devices()], len(p.graph_links())
    ([('host', 'cpu'), ('card', 'gpu')], 2)
    """
    devices = devices or {"cpu": "ryzen-9-7950x", "gpu": "rtx-3090"}
    chosen = tuple((name, _lookup(DEVICES, spec, "device")) for name, spec in devices.items())
    return Platform(chosen, _lookup(LINKS, link, "link"))


def _lookup(table: Mapping, key, what: str):
    if not isinstance(key, str):
        return key
    if key not in table:
        raise GraphFormatError(
            f"unknown {what} {key!r}",
            where=f"{what} table",
            fix=f"known {what}s: {', '.join(table)}",
        )
    return table[key]
