"""Properties every run keeps, checked against numbers the configs give, not golden files:
static energy is the system's static power (every GPU and every PIM stack) times the run's
time; no request decodes past its run's maximum sequence length, and a request cut by it gets
exactly the rest of the context."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.overrides import normalize
from sim.systems.run import RunParams, simulate
from sim.workload import load_workload
from tests.sim.systems.conftest import make_trace, request
from traces.io import read_trace

PAIR = "opt-66b+opt-1.3b"
# (GPUs, PIM stacks) of each system's platform, from configs/hardware/*.yaml.
PLATFORM = {"gpu-ad": (8, 0), "pim-sd": (8, 40), "specpim-sd": (4, 20), "saddle": (8, 40),
            "saddle-d": (8, 40)}
STATIC = "hardware.energy.static"
EXTRA_GPU_W, EXTRA_STACK_W = 7.0, 0.5


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory):
    """Prompts of 10..31 tokens, outputs of 40..61: every prompt fits the limits below."""
    rng = np.random.default_rng(11)
    reqs = [request(f"r{i}", 10 + 3 * i, rng.random(40 + 3 * i) < 0.7, p=0.6 + 0.03 * i)
            for i in range(8)]
    return str(make_trace(tmp_path_factory.mktemp("trace") / "t.jsonl", reqs))


@pytest.mark.parametrize("system", list(PLATFORM))
def test_static_energy_is_every_devices_static_power_times_the_runs_time(trace_path, system):
    base = RunParams(system=system, pair=PAIR, batch=4, trace=trace_path, split="all",
                     draft_length=4 if system in ("pim-sd", "specpim-sd") else None)
    hotter = dataclasses.replace(base, overrides=normalize(
        {f"{STATIC}.gpu_w": 60 + EXTRA_GPU_W, f"{STATIC}.pim_stack_w": 3 + EXTRA_STACK_W}, "test"))
    a, b = simulate(base)[0], simulate(hotter)[0]
    assert b.time_s == a.time_s and b.tokens == a.tokens    # static power moves no step
    gpus, stacks = PLATFORM[system]
    watts = gpus * EXTRA_GPU_W + stacks * EXTRA_STACK_W
    assert b.energy_j - a.energy_j == pytest.approx(watts * a.time_s, rel=1e-9)
    assert b.run_tokens_per_joule * b.energy_j == pytest.approx(b.tokens.generated)


@pytest.mark.parametrize("max_seq_len", [40, 64, 100, 1024])
def test_no_request_decodes_past_the_maximum_sequence_length(trace_path, max_seq_len):
    w = load_workload(trace_path, split="all", n_requests=None, seed=0,
                      validation_fraction=0.5, max_seq_len=max_seq_len, source="test")
    _, full = read_trace(trace_path)
    whole = {r.id: r for r in full}
    cut = 0
    for r in w.requests:
        natural = whole[r.id].natural_output_len
        room = max_seq_len - r.prompt_len
        assert 1 <= r.output_len <= natural
        assert r.prompt_len + r.output_len <= max_seq_len
        # cut by the limit: exactly the rest of the context, not one token short or over
        assert r.output_len == min(natural, room)
        cut += natural > room
    assert w.total_output == sum(r.output_len for r in w.requests)
    if max_seq_len <= 64:
        assert cut > 0      # the case is exercised


@pytest.mark.parametrize("sequence_length", [40, 48])
def test_a_fixed_sequence_length_is_reached_exactly(trace_path, sequence_length):
    w = load_workload(trace_path, split="all", n_requests=None, seed=0,
                      validation_fraction=0.5, max_seq_len=None, source="test",
                      sequence_length=sequence_length)
    assert all(r.prompt_len + r.output_len == sequence_length for r in w.requests)


def test_a_run_generates_exactly_the_workloads_tokens(trace_path):
    p = RunParams(system="saddle", pair=PAIR, batch=4, trace=trace_path, split="all",
                  max_seq_len=64)
    w = load_workload(trace_path, split="all", n_requests=None, seed=0,
                      validation_fraction=0.5, max_seq_len=64, source="test")
    assert simulate(p)[0].tokens.generated == w.total_output
