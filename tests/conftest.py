"""A test that patches a method of a class sim/ compiles (build_compiled.py) is marked
``pure_python``: compiled code calls the method natively and never sees the patch, so in a
compiled process the test is skipped, and `make test` runs the marked tests again with
SADDLE_PURE_PYTHON=1."""
import pytest

from common import compiled


def pytest_collection_modifyitems(config, items):
    if compiled.active():
        skip = pytest.mark.skip(reason="patches a compiled class: `make test` runs it again "
                                       "with SADDLE_PURE_PYTHON=1")
        for item in items:
            if "pure_python" in item.keywords:
                item.add_marker(skip)
