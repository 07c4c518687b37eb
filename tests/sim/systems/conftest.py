"""A tiny hand-made trace (OPT-66B + OPT-1.3B) the system tests replay."""
import numpy as np
import pytest

from traces.format import RequestTrace, TraceHeader
from traces.io import TraceWriter


def make_trace(path, requests):
    header = TraceHeader(pair="opt-66b+opt-1.3b", target="opt-66b", draft="opt-1.3b",
                         dataset="hand-made", max_seq_len=1024, offpath_len=2,
                         provenance={"generator": "tests/sim/systems/conftest.py"})
    with TraceWriter(path, header) as w:
        for r in requests:
            w.write(r)
    return path


def request(rid, prompt, accepted, p=0.9):
    accepted = np.asarray(accepted, dtype=bool)
    n = len(accepted)
    return RequestTrace(rid, "open_qa", prompt, np.full(n, p), accepted,
                        [np.array([0.5, 0.4]) for _ in range(int((~accepted).sum()))])


@pytest.fixture
def tiny_trace(tmp_path):
    rng = np.random.default_rng(7)
    reqs = [request(f"r{i}", 20 + 7 * i, rng.random(12 + 5 * i) < 0.7, p=0.6 + 0.03 * i)
            for i in range(12)]
    return str(make_trace(tmp_path / "tiny.jsonl", reqs))
