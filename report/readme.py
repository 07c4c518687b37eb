"""sim/README.md's fig12 tables, rendered from fig12's records: throughput normalised to GPU-AD
at every point, and the factors of each headline ratio (``report/published.py``'s
decomposition). ``saddle report --readme`` writes them between the README's markers
(``common/marked.py``); tests/report/test_readme_tables.py renders them from the golden fig12
records (the records ``saddle run fig12`` writes) and fails when the README's differ."""
from __future__ import annotations

import math

from common.paths import ROOT
from report.published import FACTORS, decompose

README = ROOT / "sim" / "README.md"
COMMAND = "saddle report --readme"
PAIRS = {"opt-66b+opt-1.3b": "OPT-66B + 1.3B", "opt-175b+opt-6.7b": "OPT-175B + 6.7B",
         "llama-3.1-70b+llama-3.2-1b": "Llama-70B + 1B"}
NAMES = {"gpu-ad": "GPU-AD", "gpu-sd": "GPU-SD", "gpu-sd-best": "GPU-SD-best", "pim-ad": "PIM-AD",
         "pim-sd": "PIM-SD", "pim-sd-best": "PIM-SD-best", "saddle": "SADDLE", "saddle-plus": "SADDLE+"}
FIXED_D = ("gpu-sd", "pim-sd")           # d = 8, as the paper ran them
RATIOS = (("saddle", "pim-sd"), ("saddle", "gpu-sd"), ("saddle", "pim-ad"), ("saddle", "gpu-ad"),
          ("saddle", "pim-sd-best"), ("saddle", "gpu-sd-best"), ("saddle-plus", "pim-sd-best"),
          ("saddle-plus", "saddle"))


def throughput_table(records: list[dict]) -> str:
    """Per pair and batch: GPU-AD's tokens/s, every other system over it (the searched d
    beside the -best ones), the fastest in bold."""
    by = {(r["system"], r["pair"], r["batch"]): r for r in records}
    batches = sorted({r["batch"] for r in records})
    head = ["pair", "batch", "GPU-AD tok/s"] + [NAMES[s] + (" d=8" if s in FIXED_D else "")
                                                for s in list(NAMES)[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pair, name in PAIRS.items():
        for i, batch in enumerate(batches):
            runs = {s: by[s, pair, batch] for s in NAMES}
            base = runs["gpu-ad"]["tokens_per_s"]
            best = max(runs, key=lambda s: runs[s]["tokens_per_s"])
            cells = []
            for s, r in runs.items():
                text = f"{base:.0f}" if s == "gpu-ad" else f"{r['tokens_per_s'] / base:.2f}x"
                if s.endswith("-best"):
                    text += f" (d={r['draft_length']})"
                cells.append(f"**{text}**" if s == best else text)
            lines.append(f"| {name if i == 0 else ''} | {batch} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def factor_table(records: list[dict]) -> str:
    """Per ratio of ``RATIOS``: the geometric mean of tokens/s over the points, and its factors
    (their product)."""
    tokens = {(r["system"], r["pair"], r["batch"]): r["tokens_per_s"] for r in records}
    lines = ["| ratio | ours | " + " | ".join(f if f != "pass time" else "pass time (den / num)"
                                              for f in FACTORS) + " |",
             "|---|---:|" + "---:|" * len(FACTORS)]
    for num, den in RATIOS:
        logs = [math.log(v / tokens[den, pair, batch]) for (s, pair, batch), v in tokens.items() if s == num]
        factors = decompose(records, {"num": num, "den": den})
        assert factors is not None, "fig12's records carry the pass counts"
        lines.append(f"| {NAMES[num]} / {NAMES[den]} | {math.exp(sum(logs) / len(logs)):.2f} | "
                     + " | ".join(f"{factors[f]:.2f}" for f in FACTORS) + " |")
    return "\n".join(lines) + "\n"


def blocks(records: list[dict]) -> dict[str, str]:
    return {"fig12_throughput": throughput_table(records), "fig12_factors": factor_table(records)}
