"""sim/README.md's speed table is the one ``benchmarks/bench_fig12.py --readme`` writes: the
figures are a machine's at its load, so the test checks the block's shape against the script's
rendering (its header, a row per mode with every figure), and the rendering against a
hand-made set of figures."""
import importlib.util
import re

from common.marked import marked_blocks
from common.paths import ROOT

spec = importlib.util.spec_from_file_location("bench_fig12", ROOT / "benchmarks" / "bench_fig12.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _figures(wall: float) -> dict:
    single = {"64": {"cold": {"us_per_token": 5.44, "sim_s_per_cpu_s": 47.61},
                     "warm": {"us_per_token": 3.8, "sim_s_per_cpu_s": 66.8}},
              "128": {"cold": {"us_per_token": 5.8, "sim_s_per_cpu_s": 40.0},
                      "warm": {"us_per_token": 3.9, "sim_s_per_cpu_s": 59.94}}}
    return {"wall_s": wall, "cpu_s": 2 * wall, "kernel_s": wall / 10, "jobs": 2, "runs": 96,
            "load": ["2.06", "2.56"], "single": single}


def test_the_table_renders_every_figure():
    table = bench.speed_table({"compiled": _figures(45.21), "pure": _figures(86.2)})
    assert table.splitlines()[2] == ("| compiled (2.06-2.56) | 45.2 s, 90.4 s (4.5 s) | 5.4 / 3.8 us, 47.6 / 66.8 s "
                                     "| 5.8 / 3.9 us, 40.0 / 59.9 s |")
    assert table.splitlines()[3].startswith("| pure Python (2.06-2.56) | 86.2 s, 172.4 s (8.6 s) |")


def test_the_readme_block_has_the_scripts_shape():
    block = marked_blocks((ROOT / "sim" / "README.md").read_text(), bench.COMMAND)["speed"].splitlines()
    rendered = bench.speed_table({"compiled": _figures(1.0), "pure": _figures(1.0)}).splitlines()
    assert block[:2] == rendered[:2]
    number = r"\d+\.\d"
    pair = rf"{number} / {number} us, {number} / {number} s"
    for line, mode in zip(block[2:], ("compiled", "pure Python"), strict=True):
        assert re.fullmatch(rf"\| {mode} \([\d.]+-[\d.]+\) \| {number} s, {number} s \({number} s\) \| {pair} \| {pair} \|",
                            line), line
