"""Kept for the RTL flow's imports (hw/); new code imports ``common.errors``."""
from common.errors import ConfigError, SaddleError

__all__ = ["ConfigError", "SaddleError"]
