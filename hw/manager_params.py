"""Shipped sizes of the Manager RTL blocks, read from ``configs/hardware/manager_rtl.yaml``."""
from __future__ import annotations

from sim.config import config_path, get, load_yaml
from sim.manager.softmax import SoftmaxParams


def manager_rtl_config() -> tuple[dict, str]:
    path = config_path("hardware", "manager_rtl")
    return load_yaml(path), str(path)


def section(name: str) -> tuple[dict, str]:
    data, source = manager_rtl_config()
    return get(data, name, dict, source=source), source


def size(name: str, key: str) -> int:
    sec, source = section(name)
    return get(sec, key, int, source=source, prefix=name, positive=True)


def softmax_params() -> SoftmaxParams:
    return SoftmaxParams(lanes=size("softmax", "lanes"), vocab=size("softmax", "vocab"),
                         exp_frac_bits=size("softmax", "exp_frac_bits"))
