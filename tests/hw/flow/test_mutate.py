"""Mutation testing (hw/flow/mutate.py), the CI-sized subset: faults are real design changes
that the directed checks kill where the README says they do, argued-equivalent mutants survive
them, and a fault name the blocks do not implement is refused. `saddle hw mutate` runs every
mutant against every check (hw/README.md, "Mutation testing")."""
import pytest

from hw.flow.manager_stimulus import (
    PLAN_BY_HAND,
    PLAN_SMALL,
    PLUS_SEEDS,
    RANDOM_SEEDS,
    ROUND_BY_HAND,
    SMALL,
    SOFTMAX,
    TAU_BY_HAND,
    TAU_SMALL,
    aging_pairs,
    calibrated_pairs,
    corner_pairs,
    plus_pairs,
    random_pairs,
)
from hw.flow.mutate import EQUIVALENT, mutants, mutate, program_check, replay_check
from hw.flow.testbench.pe_vectors import corner_program
from hw.manager.manager import Manager
from hw.pe.bank_pe import BankPE


def test_catalog():
    manager, pe = mutants("manager"), mutants("pe")
    assert len(manager) >= 15 and len(pe) >= 10 and not set(manager) & set(pe)
    assert all(manager.values()) and all(pe.values())
    assert set(EQUIVALENT) <= set(manager) | set(pe)
    with pytest.raises(ValueError, match="unknown fault 'tie_break'"):
        Manager.from_config(SMALL, SOFTMAX, "tie_break")
    with pytest.raises(ValueError, match="unknown fault 'h_compare_le'"):
        BankPE(4, fault="h_compare_le")
    with pytest.raises(ValueError, match="unknown mutant nope"):
        mutate("pe", ["nope"], checks=[])


def test_manager_mutants_killed_by_the_directed_sequences():
    checks = [replay_check("round by hand", SMALL, ROUND_BY_HAND, softmax=SOFTMAX, stall=0.5, seed=4),
              replay_check("directed corners", SMALL, corner_pairs(), softmax=SOFTMAX, stall=0.3, seed=5)]
    report = mutate("manager", ["tlm_attention_strict", "dlm_fc_compare_reversed", "h_compare_le",
                                "retire_drains_while_locked", "argmax_prefers_b", "cur_register_stale",
                                "distinct_after_count", "prob_factor_late", "select_counts_lost"], checks)
    assert not report.clean_failures
    got = {r.fault: (r.killed_by, r.at) for r in report.results}
    assert got == {
        # 4 tokens of 2 requests against threshold 2: equality, GPU (transaction 11).
        "tlm_attention_strict": ("round by hand", 11),
        # The last SchedulerQuery: 1 drafting request < 2, PIM.
        "dlm_fc_compare_reversed": ("round by hand", 17),
        # The first DraftToken of the corners: H = tau exactly, drafting goes on.
        "h_compare_le": ("directed corners", 5),
        # Retire(0) during the pass while request 1 holds an eager token.
        "retire_drains_while_locked": ("directed corners", 15),
        "argmax_prefers_b": (None, None),
        # The clock work's pipelines: the first Issue's pass (its MAPPING event, transaction
        # 11) and the first DraftToken's H (transaction 4).
        "cur_register_stale": ("round by hand", 11),
        "distinct_after_count": ("round by hand", 11),
        "prob_factor_late": ("round by hand", 4),
        "select_counts_lost": ("round by hand", 11),
    }
    assert report.ok and report.killed == report.killable == 8


def test_option_mutants_killed_by_their_options_stimulus():
    """The calibrated rule's, aging's and the pipelined selector's mutants, each killed by the
    random stimulus of the option it breaks (prefixes of `saddle hw mutate`'s checks, long
    enough to reach the kill)."""
    config, pairs = calibrated_pairs()
    aging_config, aging = aging_pairs(1)
    checks = [replay_check("calibrated", config, pairs[:40], softmax=SOFTMAX, stall=0.3, seed=1),
              replay_check("aging K = 1", aging_config, aging[:300], softmax=SOFTMAX, stall=0.3, seed=1),
              replay_check("pipelined k = 2", SMALL, random_pairs(RANDOM_SEEDS[0])[0][:120], softmax=SOFTMAX,
                           stall=0.3, seed=7, selector_stage_levels=2)]
    report = mutate("manager", ["acceptance_one_wraps", "acceptance_bin_low", "aging_served_not_reset",
                                "aging_write_keeps_age", "selector_selected_not_dropped"], checks)
    assert not report.clean_failures
    assert {r.fault: (r.killed_by, r.at) for r in report.results} == {
        "acceptance_one_wraps": ("calibrated", 11),
        "acceptance_bin_low": ("calibrated", 2),
        "aging_served_not_reset": ("aging K = 1", 246),
        "aging_write_keeps_age": ("aging K = 1", 131),
        # The shipped selector is pipelined (k = 3, configs/hardware/manager_rtl.yaml): every
        # check runs the mutated stage registers, and aging's random sequence reaches it first.
        "selector_selected_not_dropped": ("aging K = 1", 6),
    }


def test_pe_mutants_killed_by_the_corner_cases():
    faults = ["acc_not_cleared", "flags_not_cleared", "drain_early", "product_truncated", "subnormal_inputs_flushed",
              "round_ties_away", "round_sticky_dropped", "tree_carry_dropped", "axpy_tree_not_masked",
              "align_sign_not_extended", "start_mode_from_register"]
    report = mutate("pe", faults, [program_check("corner cases", corner_program(4), 4)])
    assert not report.clean_failures
    assert all(r.killed_by == "corner cases" for r in report.results if r.fault != "start_mode_from_register")
    assert report.ok and report.killed == report.killable == 10


def test_sram_mutants_killed_by_the_sram_stimulus():
    """The SRAM storage's mutants: the random sequence with long stalls on a Manager whose pools
    keep their records in SRAM (a prefix of `saddle hw mutate`'s check); the shipped (flip-flop)
    design does not contain the faults."""
    checks = [replay_check("SRAM storage", SMALL, random_pairs(RANDOM_SEEDS[1])[0][:300], softmax=SOFTMAX,
                           stall=0.3, seed=8, long_stalls=True, storage="sram")]
    faults = ["sram_read_every_cycle", "sram_take_by_match", "sram_move_unprimed"]
    report = mutate("manager", faults, checks)
    assert not report.clean_failures
    assert {r.fault for r in report.results if r.killed_by == "SRAM storage"} == set(faults)


def test_plus_mutants_killed_by_the_plus_stimulus():
    """SADDLE+'s mutants (planner, tau table, gain sum, locked threshold): the sequences worked
    out by hand and a prefix of the first random plus sequence, as `saddle hw mutate` runs them."""
    config, pairs = plus_pairs(PLUS_SEEDS[0])
    checks = [replay_check("planner by hand", PLAN_SMALL, PLAN_BY_HAND, stall=0.3, seed=2),
              replay_check("tau table by hand", TAU_SMALL, TAU_BY_HAND, stall=0.3, seed=2),
              replay_check("random", config, pairs[:360], softmax=SOFTMAX, stall=0.3, seed=PLUS_SEEDS[0],
                           long_stalls=True)]
    faults = ["planner_argmax_reversed", "planner_value_without_bonus", "planner_requests_per_token",
              "planner_wait_bound_le", "planner_waits_not_reset", "planner_later_without_new",
              "tau_bucket_by_live", "gain_kept_on_stop", "locked_threshold_inverted"]
    report = mutate("manager", faults, checks)
    assert not report.clean_failures
    assert {r.fault: (r.killed_by, r.at) for r in report.results} == {
        # The first Issue: the best prefix (3 tokens, not 1) and the wait it answers.
        "planner_argmax_reversed": ("planner by hand", 7),
        "planner_wait_bound_le": ("planner by hand", 7),
        # The second wait: the count restarted at the pass.
        "planner_waits_not_reset": ("planner by hand", 14),
        # The last Issue: no wait, because request 1 drafts with nothing pooled (its term in the
        # next step's cost, its H in G, request 0's H out of G when it stopped).
        "planner_requests_per_token": ("planner by hand", 27),
        "planner_later_without_new": ("planner by hand", 27),
        "gain_kept_on_stop": ("planner by hand", 27),
        # Two admitted requests: tau 16000, not 24000; the query while the pass runs.
        "tau_bucket_by_live": ("tau table by hand", 4),
        "locked_threshold_inverted": ("tau table by hand", 10),
        "planner_value_without_bonus": ("random", 348),
    }
