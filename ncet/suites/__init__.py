"""Whole benchmark suites: a VNN-COMP `instances.csv` run on Dask, each network's import
certified once, each instance's property read, margin bounded, property tightened and
counterexamples judged, one result row per instance, resumable (docs/suites.md).

Importing this package does not import Dask; `run_suite` does, and needs the `suite` extra.
"""

from .instances import Instance, read_instances, witnesses_for
from .runner import DEFAULT_SPLITS, run_suite
from .table import COLUMNS, read_table, summary
from .work import OUTCOMES, STAGES

__all__ = ["COLUMNS", "DEFAULT_SPLITS", "Instance", "OUTCOMES", "STAGES", "read_instances",
           "read_table", "run_suite", "summary", "witnesses_for"]
