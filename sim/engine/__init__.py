"""Discrete-event core of the simulator (integer picoseconds, deterministic event order, devices
shared by the draft and target models, the cost adapter, timelines); the systems in
``sim/systems/`` drive it."""
