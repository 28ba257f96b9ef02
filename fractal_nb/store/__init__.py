"""The DuckDB graph store: the only package of fractal_nb that speaks SQL."""

from .graph_store import GraphStore
from .worker_store import WorkerStore

__all__ = ["GraphStore", "WorkerStore"]
