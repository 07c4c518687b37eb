"""Discrete-event core of the simulator: integer picoseconds, deterministic event order,
devices shared between the draft and target models, a cached cost adapter and a timeline.

The engine knows nothing about speculative decoding: the systems in ``sim/systems/`` drive it.
"""
