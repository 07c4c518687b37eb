"""Tables and figures from run records: the experiment plots, the sweep plots, the paper's
published claims beside ours and side-by-side comparisons (the ``plot:``, ``published:`` and
``compare:`` keys of an experiment file)."""

