"""Our cost models against the simulators the paper was built on: the reference tables
(``tables/``, made by ``regenerate.py``), their comparison (``compare.py``) and
``saddle validate`` (``cli.py``)."""
