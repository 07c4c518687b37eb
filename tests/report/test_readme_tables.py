"""sim/README.md's tables of experiment results are the rendering of their records
(report/readme.py): the golden fig12 and stopping records (tests/sim/systems/golden_experiments.json.gz,
which `saddle run fig12` and `saddle run stopping` reproduce) rendered must equal the README's
marked blocks; the renderers by hand on a few points."""
import gzip
import json
from pathlib import Path

import yaml

from common.marked import marked_blocks
from common.paths import CONFIGS
from report import readme

GOLDEN = Path(__file__).parents[1] / "sim" / "systems" / "golden_experiments.json.gz"


def test_sim_readme_fig12_tables_are_the_golden_records_rendered():
    records = list(json.loads(gzip.open(GOLDEN).read())["fig12"].values())
    assert marked_blocks(readme.README.read_text(), readme.COMMAND) == readme.blocks(records), \
        "sim/README.md's fig12 tables are stale: run `saddle report --out docs/report --readme`"


def _record(system, pair, batch, tokens_per_s, d=None, passes=10, generated=1000):
    # tokens/s = generated / passes x passes / verify_s x verify_s / time_s x window
    return {"system": system, "pair": pair, "batch": batch, "draft_length": d,
            "tokens_per_s": tokens_per_s, "run_tokens_per_s": tokens_per_s, "time_s": generated / tokens_per_s,
            "verification_s": generated / tokens_per_s, "verification_passes": passes,
            "tokens": {"generated": generated}}


def test_tables_by_hand(monkeypatch):
    monkeypatch.setattr(readme, "PAIRS", {"p": "P"})
    speeds = {"gpu-ad": 100, "gpu-sd": 150, "gpu-sd-best": 160, "pim-ad": 120, "pim-sd": 200,
              "pim-sd-best": 250, "saddle": 200, "saddle-plus": 300}
    records = [_record(s, "p", 16, v, d=4 if s.endswith("-best") else None,
                       passes=50 if s == "saddle-plus" else 10) for s, v in speeds.items()]
    table = readme.throughput_table(records).splitlines()
    assert table[2] == ("| P | 16 | 100 | 1.50x | 1.60x (d=4) | 1.20x | 2.00x | 2.50x (d=4) | 2.00x "
                        "| **3.00x** |")
    factors = {line.split(" | ")[0][2:]: line for line in readme.factor_table(records).splitlines()[2:]}
    # SADDLE+ over SADDLE: 1.5x, from five times the passes (tokens per pass 1/5, pass time 7.5x)
    assert factors["SADDLE+ / SADDLE"] == "| SADDLE+ / SADDLE | 1.50 | 0.20 | 7.50 | 1.00 | 1.00 |"


def test_sim_readme_stopping_table_is_the_golden_records_rendered():
    records = list(json.loads(gzip.open(GOLDEN).read())["stopping"].values())
    experiment = yaml.safe_load((CONFIGS / "experiments" / "stopping.yaml").read_text())
    assert marked_blocks(readme.README.read_text(), readme.run_command("stopping")) == \
        {"compare": readme.compare_block(experiment, records)}, \
        "sim/README.md's stopping table is stale: run `saddle run stopping --readme`"


def test_compare_table_by_hand():
    experiment = {"compare": {"reference": "o", "baseline": "b"},
                  "systems": [{"system": "b"}, {"system": "b", "label": "x"}, {"system": "o"}]}
    speeds = {"b": (100, 200), "x": (110, 180), "o": (125, 250)}
    records = [{"system": s, "pair": "p", "batch": batch, "sequence_length": None, "tokens_per_s": v,
                "tokens": {"drafted": 3 * batch, "accepted": 2 * batch if s != "o" else batch * 3}}
               for s, vs in speeds.items() for batch, v in zip((16, 32), vs)]
    lines = readme.compare_block(experiment, records).splitlines()
    assert lines[0] == ("| system | mean gap to o | tokens/s over b (geometric mean) | faster than b at "
                        "| drafted per accepted |")
    assert lines[2:] == ["| b | 20.0 % | 1.000 | - | 1.50-1.50 |",
                         # gaps 12 % and 28 %; ratios 1.1 and 0.9
                         "| x | 20.0 % | 0.995 | 1 of 2 | 1.50-1.50 |",
                         "| o | 0.0 % | 1.250 | 2 of 2 | 1.00-1.00 |"]
