"""The ``aiocoord`` command: demo, embedded ZooKeeper, inspect, jobs and bench.

`main` is the console entry point; `local_zookeeper` runs a throwaway
development server for examples and scripts.
"""

from __future__ import annotations

from .main import main as main
from .zk import local_zookeeper as local_zookeeper

__all__ = ("local_zookeeper", "main")
