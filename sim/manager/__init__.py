"""Bit-exact transaction-level model of the SADDLE Manager (see README.md in this folder)."""
from sim.manager.config import ManagerConfig
from sim.manager.manager import Manager

__all__ = ["Manager", "ManagerConfig"]
