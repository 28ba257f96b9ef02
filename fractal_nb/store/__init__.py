"""The DuckDB graph store: the only package of fractal_nb that speaks SQL."""

from .contract import Store, WorkerStore
from .graph_store import GraphStore

__all__ = ["GraphStore", "Store", "WorkerStore"]
