"""HBM3-PIM timing: a hand-worked command schedule, the analytic model against the
command-level scheduler over the issue's sweep, and physical bounds."""
import pytest

from sim.cost.pim import load_pim
from tests.sim.cost.dram_scheduler import ChannelScheduler

PIM = load_pim("hbm3_pim")
BPE = 2


def test_config_derived_values():
    assert PIM.tck_ps == 769 and PIM.channels == 16 and PIM.banks_per_channel == 64
    assert PIM.banks == 1024 and PIM.columns_per_row == 32
    assert PIM.t.RFC == 456                        # ceil(350 ns / 0.769 ns)
    assert PIM.capacity_bytes == 16 * 2**30
    # 1024 banks x 32 B every 4 x 0.769 ns; 16 lanes x 2 FLOPs per 32 B column
    assert PIM.peak_bandwidth() == pytest.approx(1024 * 32 / (4 * 0.769e-9))
    assert PIM.peak_bandwidth(True) == pytest.approx(1024 * 32 / (6 * 0.769e-9))
    assert PIM.peak_flops() == pytest.approx(PIM.peak_bandwidth())


def test_hand_worked_schedule_small_instance():
    """One instance, 64 keys, head dim 64, one query, on one channel (64 banks):
    each bank holds 1 key (128 B = 4 columns) and 1 dimension of V (64 x 2 B = 4 columns).
    PE latency L = 6 from the last MAC to the result (bank_pe.yaml, the RTL's pipeline; the
    DRAIN overlaps it). Row commands (ACT, PRE) and column commands (WR, MAC, RD) have separate
    buses.

    cycle    command
      0..6   WR x4     query: 64 x 2 B = 4 columns, CCD_S = 2 apart                -> 8
      8      ACT       K row
     27..39  MAC x4    RCD = 19 after ACT, 4 apart; results out at 39 + L = 45
     53      PRE       max(ACT + RAS = 53, last MAC + RTP_L = 47)
     45..47  RD x4     64 scores x 2 B = 4 columns, 2 per pseudo-channel            -> 49
     49      softmax   64 / 16 per cycle                                            -> 53
     53..59  WR x4     probabilities                                                -> 61
     72      ACT       V row: max(61, PRE + RP = 72, ACT + RC = 71)
     91..103 MAC x4    results out at 103 + L = 109; PRE at 117
    109..111 RD x4     64 outputs x 2 B                                             -> 113
    The V row closes at 117 + 19 = 136: a following instance (query written 113..121) could
    activate at 136, so the analytic model charges this instance 136 - 8 = 128.
    """
    assert PIM.pe_latency == 6
    sched = ChannelScheduler(PIM, PIM.spacing(False), refresh=False)
    sched.attention_instance(64, 64, 1, BPE)
    rows = [(t, c) for t, c in sched.log if c in ("ACT", "MAC", "PRE")]
    assert rows == [(8, "ACT"), (27, "MAC"), (31, "MAC"), (35, "MAC"), (39, "MAC"), (53, "PRE"),
                    (72, "ACT"), (91, "MAC"), (95, "MAC"), (99, "MAC"), (103, "MAC"), (117, "PRE")]
    assert sched.now == 113
    assert PIM.attention_instance(64, 64, 1, BPE, False).cycles == 128
    sched.attention_instance(64, 64, 1, BPE)
    assert [t for t, c in sched.log if c == "ACT"][2] == 136 == 128 + 8
    # Under the power constraint 4 MACs still fit inside RAS: same time. With 8 queries the
    # 32 MACs per row set the row time: drain 19 + 31 x 6 + L = 211, row slot
    # 19 + 31 x 6 + 8 + 19 = 232, so 21 cycles of tail; at 4 tCK: 149 and 21.
    assert PIM.attention_instance(64, 64, 1, BPE, True).cycles == 128
    assert PIM.mac_stream(4, 8, 6) == (211, 21) and PIM.mac_stream(4, 8, 4) == (149, 21)


def test_refresh_by_hand():
    # 10000 busy cycles: 1 refresh due -> 10456 -> 2 due -> 10912 -> still 2
    assert PIM.with_refresh(10_000) == 10_912
    assert PIM.with_refresh(5_069) == 5_069


def _scheduled(per_channel, L, d, q, power, overlap=True):
    """Cycles of a channel running ``per_channel`` instances, command by command, after each."""
    sched = ChannelScheduler(PIM, PIM.spacing(power), overlap=overlap)
    done = []
    for _ in range(per_channel):
        sched.attention_instance(L, d, q, BPE)
        done.append(sched.now)
    return done


@pytest.mark.parametrize("power", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_analytic_matches_command_schedule_over_the_issue_sweep(power, d):
    """Instances 1..256 (round-robin: the busiest channel runs ceil(N / 16)), contexts
    128..2048, with and without the power constraint: within 10% of the command schedule."""
    errors = []
    for L in (128, 300, 512, 2048):
        for q in (1, 4, 9):
            done = _scheduled(16, L, d, q, power)
            for n in (1, 7, 16, 17, 64, 100, 256):
                analytic = PIM.attention_channels([(L, d, q)] * n, BPE, power).cycles
                scheduled = done[-(-n // 16) - 1]
                errors.append((analytic - scheduled) / scheduled)
    assert max(map(abs, errors)) <= 0.10
    assert abs(sum(errors) / len(errors)) <= 0.01


def test_in_order_controller_is_slower_than_the_model():
    """A controller that makes every transfer wait for closed rows is up to ~20% slower: the
    model assumes HBM3's separate row and column command buses are used."""
    analytic = PIM.attention_channels([(128, 128, 1)] * 256, BPE, True).cycles
    in_order = _scheduled(16, 128, 128, 1, True, overlap=False)[-1]
    assert 0.75 < analytic / in_order < 0.85


def test_fewer_instances_than_channels_leave_channels_idle():
    one = PIM.attention_channels([(512, 128, 1)], BPE, False)
    assert one.channels_used == 1
    for n in (2, 8, 16):
        load = PIM.attention_channels([(512, 128, 1)] * n, BPE, False)
        assert load.cycles == one.cycles and load.channels_used == n
    seventeen = PIM.attention_channels([(512, 128, 1)] * 17, BPE, False)
    assert seventeen.busy_cycles == 2 * one.busy_cycles


def test_query_tokens_reuse_the_row_buffer_and_turn_compute_bound():
    c = {q: PIM.attention_instance(2048, 128, q, BPE, False).cycles for q in (1, 2, 8, 32)}
    assert c[1] < c[2] < 2 * c[1]                  # more work, but rows open once
    # K and V columns per bank: 32 tokens x 8 + 2 dims x 2048 x 2 B / 32 = 256 + 256
    mac_bound = 512 * 32 * 4
    assert mac_bound < c[32] < 1.3 * mac_bound     # MAC issue dominates at large q


def test_gqa_group_counts_as_queries_on_one_kv_head():
    # 8 query heads on one KV head = 8 queries on that head; cheaper than 8 separate heads
    grouped = PIM.attention_instance(1024, 128, 8, BPE, False).cycles
    separate = 8 * PIM.attention_instance(1024, 128, 1, BPE, False).cycles
    assert grouped < separate


def test_power_constraint_slows_mac_bound_work():
    slow = PIM.attention_instance(2048, 128, 8, BPE, True).cycles
    fast = PIM.attention_instance(2048, 128, 8, BPE, False).cycles
    assert 1.3 < slow / fast <= 1.5


@pytest.mark.parametrize("n, L, d, q", [(1, 128, 64, 1), (256, 2048, 128, 1), (64, 1024, 128, 9),
                                        (33, 300, 64, 2)])
@pytest.mark.parametrize("power", [False, True])
def test_attention_within_physical_bounds(n, L, d, q, power):
    load = PIM.attention_channels([(L, d, q)] * n, BPE, power)
    seconds = load.cycles * PIM.tck_ps * 1e-12
    kv_bytes = n * 2 * L * d * BPE
    macs = n * 2 * L * d * q
    assert seconds >= kv_bytes / PIM.peak_bandwidth(power)
    assert seconds >= 2 * macs / PIM.peak_flops(power)
    # the busiest channel holds ceil(n / 16) instances and cannot beat its own 64 banks
    per_channel = -(-n // 16) * 2 * L * d * BPE
    assert load.cycles >= per_channel / (64 * 32) * PIM.spacing(power)


def test_gemv_by_hand_and_against_schedule():
    # OPT-1.3B qkv on 5 stacks: n = 6144 >= 5120 banks -> 2 rows per bank, k = 2048 -> 128 cols
    # each: 256 columns = 8 DRAM rows per bank; 4 tokens -> 4 MACs per column
    w = PIM.gemv(4, 2048, 6144, BPE, 5, False)
    assert w.k_split == 1
    row = max(63, max(45, 19 + (32 * 4 - 1) * 4 + 8) + 19)          # 554
    last = 19 + (32 * 4 - 1) * 4 + PIM.pe_latency                    # 533: ACT to last result
    x_write = 4 * 2048 * 2 // 32 * 2                                 # 1024
    read = 64 * 2 * 4 * 2 // 64 * 2                                  # 32, overlaps the 21 of tail
    refresh = 456                         # 5466 cycles of work cross one REFI (5070)
    assert w.cycles == x_write + 7 * row + last + read + refresh
    for refresh in (False, True):
        sched = ChannelScheduler(PIM, 4, refresh=refresh)
        sched.write_columns(4 * 2048 * 2 // 32)
        sched.gemv_stream([2 * 2048 * 2] * 64, 4)
        sched.read_columns(64 * 2 * 4 * 2 // 32)
        if refresh:   # the controller refreshes once the stream's rows are closed: 21 later
            assert sched.now == w.cycles + 21
        else:
            assert sched.now == w.cycles - 456
    # out_proj of OPT-1.3B: n = 2048 < 5120 banks -> k split in 2, partial sums leave
    w = PIM.gemv(4, 2048, 2048, BPE, 5, False)
    assert w.k_split == 2 and w.result_bytes == 2048 * 2 * 4 * 4


def test_gemv_within_bounds():
    for tokens in (1, 4, 16, 64):
        for k, n in ((2048, 6144), (8192, 2048), (4096, 50272)):
            w = PIM.gemv(tokens, k, n, BPE, 5, False)
            seconds = w.cycles * PIM.tck_ps * 1e-12
            assert seconds >= k * n * BPE / (5 * PIM.peak_bandwidth())
            assert seconds >= 2 * tokens * k * n / (5 * PIM.peak_flops())
