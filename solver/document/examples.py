"""The graphs bundled in ``resources/graphs`` (teaching graphs and the model zoo)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["GRAPHS_DIR", "bundled_graphs", "example_path", "DEFAULT_EXAMPLE"]

GRAPHS_DIR = Path(__file__).resolve().parents[2] / "resources" / "graphs"
DEFAULT_EXAMPLE = "chain"
_SUFFIX = ".graph.json"


def bundled_graphs() -> dict[str, Path]:
    """Bundled graph files by short name (the file name without ``.graph.json``), sorted."""
    return {p.name[: -len(_SUFFIX)]: p for p in sorted(GRAPHS_DIR.glob(f"*{_SUFFIX}"))}


def example_path(name: str) -> Path:
    """The path of a bundled graph; ``KeyError`` lists the valid names."""
    graphs = bundled_graphs()
    if name not in graphs:
        raise KeyError(f"no bundled graph {name!r}; choose one of {', '.join(graphs)}")
    return graphs[name]
