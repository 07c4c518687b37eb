"""Re-export for sim/cost/validation.py; import ``common.paths``."""
from common.paths import BUILD, CONFIGS, ROOT, TRACE_DATA, results_dir

__all__ = ["BUILD", "CONFIGS", "ROOT", "TRACE_DATA", "results_dir"]
