"""Kept for the RTL flow's and benchmarks' imports; new code imports ``common.paths``."""
from common.paths import BUILD, CONFIGS, ROOT, TRACE_DATA, results_dir

__all__ = ["BUILD", "CONFIGS", "ROOT", "TRACE_DATA", "results_dir"]
