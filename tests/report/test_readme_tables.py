"""sim/README.md's fig12 tables are the rendering of fig12's records (report/readme.py): the
golden fig12 records (tests/sim/systems/golden_experiments.json.gz, which `saddle run fig12`
reproduces) rendered must equal the README's marked blocks; the renderer by hand on two points."""
import gzip
import json
from pathlib import Path

from common.marked import marked_blocks
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
