"""ChannelPlacement against a brute-force placement: every job on its channel one by one, each
channel's load and job count summed, and the slowest channel with refresh (tail included) the
maximum over all channels (seeded random shapes, with and without wrap-around and laps)."""
import random

import pytest

from sim.cost.pim import ChannelPlacement, load_pim

PIM = load_pim("hbm3_pim")


def brute(cycles, channels, repeat, odd_extra):
    """(loads of the used channels, last job and job count of each)."""
    load, count, last = [0] * channels, [0] * channels, [0] * channels
    for i in range(len(cycles) * repeat):
        load[i % channels] += cycles[i // repeat]
        count[i % channels] += 1
        last[i % channels] = i // repeat
    used = min(len(cycles) * repeat, channels)
    return ([load[c] + odd_extra * (count[c] % 2) for c in range(used)], last[:used], count[:used])


@pytest.mark.parametrize("seed", range(6))
def test_loads_and_slowest_channel_equal_a_job_by_job_placement(seed):
    rng = random.Random(seed)
    for _ in range(150):
        n, channels, repeat = rng.randint(1, 40), rng.randint(1, 90), rng.choice([1, 2, 8, 32, 40, 100, 170])
        cycles = [rng.randint(1, 60_000) for _ in range(n)]
        odd_extra = rng.choice([0, rng.randint(1, 3000)])
        tails = {(r, paired): rng.randint(0, 4000) for r in range(n) for paired in (False, True)}
        placement = ChannelPlacement(n, channels, repeat)
        loads, last, count = brute(cycles, channels, repeat, odd_extra)
        assert placement.loads(cycles, odd_extra) == loads
        busiest = max(loads)
        assert placement.placed(cycles, odd_extra, PIM.with_refresh) == (PIM.with_refresh(busiest), busiest)
        slowest = max(PIM.with_refresh(load, tails[r, k % 2 == 0]) for load, r, k in zip(loads, last, count))
        assert placement.placed(cycles, odd_extra, PIM.with_refresh,
                                lambda r, paired, tails=tails: tails[r, paired]) == (slowest, busiest)
