"""Experiments: a YAML file in ``configs/experiments/`` describes a grid of runs; ``saddle run``
executes it (resumably), and writes JSON, CSV, the resolved config and plots."""
