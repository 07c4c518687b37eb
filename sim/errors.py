"""Re-export for sim/cost, sim/manager, sim/systems and sim/pe_ref.py; import ``common.errors``."""
from common.errors import ConfigError, SaddleError

__all__ = ["ConfigError", "SaddleError"]
