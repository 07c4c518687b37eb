"""Design-space sweeps (``saddle sweep FILE``): a base experiment, axes over any key of its
resolved config, one result row per run (``spec`` reads the file, ``sampling`` draws points,
``run`` executes them on a backend of ``sim/experiments/backends.py``, ``plots`` draws them)."""
