"""Every RTL block that `saddle hw export` and `saddle hw synth` know, by name.

Each entry maps a block name to a zero-argument factory returning the ``wiring.Component`` at
its shipped (full) size. Tests build smaller instances from the classes directly.
Factories import lazily so that listing the blocks does not elaborate anything.
"""
from __future__ import annotations

from typing import Callable

BLOCKS: dict[str, Callable[[], object]] = {
}
