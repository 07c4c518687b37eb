"""A tiny hand-made trace for sweep tests (the simulator tests' one)."""
import numpy as np
import pytest

from tests.sim.systems.conftest import make_trace, request


@pytest.fixture(scope="session")
def tiny_trace_path(tmp_path_factory):
    rng = np.random.default_rng(7)
    reqs = [request(f"r{i}", 20 + 7 * i, rng.random(12 + 5 * i) < 0.7, p=0.6 + 0.03 * i)
            for i in range(8)]
    return str(make_trace(tmp_path_factory.mktemp("trace") / "tiny.jsonl", reqs))
