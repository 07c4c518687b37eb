"""docs/extending.md is a test that runs: its code blocks are the files of docs/examples/, the
registry lines it shows are executed as written (on the catalog and the rules' registry of
this process, restored afterwards: the shipped files are not edited), and the new system and
stopping rule are simulated and checked."""
from __future__ import annotations

import importlib.abc
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

import common.config
from sim.manager.transactions import DraftToken
from sim.systems import catalog
from sim.systems.registry import STOP_RULES
from sim.systems.resolve import load_tau
from sim.systems.run import RunParams, simulate

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "extending.md"
EXAMPLES = ROOT / "docs" / "examples"
# A block whose fence names a file: ```python docs/examples/saddle_cap.py
BLOCK = re.compile(r"^```(\w+) (\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# Where the walkthrough puts each example: module name -> file
MODULES = {"sim.systems.saddle_cap": EXAMPLES / "saddle_cap.py",
           "sim.systems.min_of_two": EXAMPLES / "min_of_two.py"}
SMALL = dict(pair="opt-66b+opt-1.3b", batch=8, requests=16, sequence_length=1024)


def blocks() -> dict[str, str]:
    """The walkthrough's named blocks: name -> text."""
    found: dict[str, str] = {}
    for _, name, text in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        assert name not in found, f"docs/extending.md: two blocks named {name}"
        found[name] = text
    return found


def test_the_walkthrough_shows_the_example_files_verbatim():
    shown = blocks()
    files = sorted(str(p.relative_to(ROOT)) for p in EXAMPLES.iterdir() if p.is_file())
    assert sorted(n for n in shown if n.startswith("docs/examples/")) == files
    for name in files:
        assert shown[name] == (ROOT / name).read_text(encoding="utf-8"), name


class _Examples(importlib.abc.MetaPathFinder):
    """Imports the example files under the module names the walkthrough gives them."""

    def find_spec(self, name, path=None, target=None):
        if name in MODULES:
            return importlib.util.spec_from_file_location(name, MODULES[name])
        return None


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """The process as if the walkthrough's steps were done: its registry lines executed, the
    system's YAML in (a temporary copy of) configs/systems/."""
    configs = tmp_path_factory.mktemp("repo") / "configs"
    shutil.copytree(common.config.CONFIGS, configs)
    shutil.copy(EXAMPLES / "saddle-cap4.yaml", configs / "systems" / "saddle-cap4.yaml")
    finder, by_name, rules = _Examples(), dict(catalog.BY_NAME), dict(STOP_RULES)
    original = common.config.CONFIGS
    sys.meta_path.insert(0, finder)
    common.config.CONFIGS = configs
    try:
        shown = blocks()
        exec(shown["sim/systems/catalog.py"], dict(vars(catalog)))    # the catalog's new lines
        exec(shown["sim/systems/__init__.py"], {"__name__": "sim.systems"})   # the rule's import
        yield
    finally:
        common.config.CONFIGS = original
        sys.meta_path.remove(finder)
        for name in MODULES:
            sys.modules.pop(name, None)
        catalog.BY_NAME.clear()
        catalog.BY_NAME.update(by_name)
        STOP_RULES.clear()
        STOP_RULES.update(rules)


def conserved(record) -> None:
    t = record.tokens
    assert t.drafted == t.accepted + t.rejected + t.discarded
    assert t.generated == t.accepted + t.tlm_tokens
    assert sum(t.discard_reasons.values()) == t.discarded


def longest_round(run) -> int:
    """The highest round position of a draft token the Manager was sent."""
    return max(txn.position for txn, _ in run.events if type(txn) is DraftToken)


def test_the_capped_system_never_drafts_more_than_its_cap(extended):
    from sim.systems.saddle_cap import CAP, SaddleCapRun

    capped, run = simulate(RunParams(system="saddle-cap4", **SMALL), record=True)
    assert type(run) is SaddleCapRun and capped.system == "saddle-cap4"
    conserved(capped)
    assert longest_round(run) == CAP
    saddle, plain = simulate(RunParams(system="saddle", **SMALL), record=True)
    assert longest_round(plain) > CAP                         # the cap is what made the difference
    assert capped.tokens.generated == saddle.tokens.generated
    assert capped.tokens.drafted < saddle.tokens.drafted
    # The Manager's own maximum gives the same rounds (docs/extending.md says why times differ).
    limited, _ = simulate(RunParams(system="saddle", max_draft_len=CAP, **SMALL))
    assert limited.tokens == capped.tokens


def test_min_of_two_drafts_no_more_than_the_threshold_rule(extended):
    tau = load_tau(SMALL["pair"])
    threshold, _ = simulate(RunParams(system="saddle", **SMALL))
    for c in (tau, 0.7, 0.9):
        record, run = simulate(RunParams(system="saddle", stop="min-of-two", stop_param=c,
                                         tau=tau, **SMALL))
        assert type(run.setup.stop).__name__ == "MinOfTwo" and record.stop == "min-of-two"
        conserved(record)
        assert record.tokens.generated == threshold.tokens.generated
        if c <= tau:    # H_t <= p_t: a token with p_t < c <= tau has already stopped the round
            assert record.tokens == threshold.tokens
        else:
            assert record.tokens.drafted < threshold.tokens.drafted


def test_min_of_two_on_a_lockstep_system(extended):
    tau = load_tau(SMALL["pair"])
    threshold, _ = simulate(RunParams(system="saddle-d", **SMALL))
    record, run = simulate(RunParams(system="saddle-d", stop="min-of-two", stop_param=0.7,
                                     tau=tau, **SMALL))
    assert type(run).__name__ == "SaddleDRun"
    conserved(record)
    assert record.tokens.drafted < threshold.tokens.drafted


def test_min_of_two_reads_the_pairs_tau_as_the_threshold_rule_does(extended):
    given, _ = simulate(RunParams(system="saddle", stop="min-of-two", stop_param=0.7,
                                  tau=load_tau(SMALL["pair"]), **SMALL))
    read, _ = simulate(RunParams(system="saddle", stop="min-of-two", stop_param=0.7, **SMALL))
    assert read.tau == given.tau and read.tokens == given.tokens
