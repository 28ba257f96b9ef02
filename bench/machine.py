"""The lines every benchmark prints first: what ran it, and how busy the machine was."""

from __future__ import annotations

import os
import platform

import duckdb


def print_header(title: str) -> None:
    """Title, DuckDB and Python versions, platform, usable CPUs and the load average."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    print(title)
    print(
        f"  DuckDB {duckdb.__version__}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}"
    )
    print(f"  CPUs: os.cpu_count()={os.cpu_count()}, usable={affinity}; load average {load}")
    print()
