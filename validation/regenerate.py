"""Regenerate the reference tables of validation/tables/ by running the reference simulators.

    python validation/regenerate.py --attacc SRC --ramulator DIR [--only steps|pim] [--out DIR]

SRC is a checkout of AttAcc's simulator (github scale-snu/attacc_simulator); DIR is a Ramulator2
work tree with AttAcc's PIM patches applied and built (AttAcc's README: `set_pim_ramulator.sh`,
then CMake), holding the `ramulator2` binary and `trace_gen/`. Neither is part of this project:
this script imports AttAcc's Python modules from SRC and runs the binary from DIR, and only the
numbers they print are written here, with the source commits, the command and every point's
parameters (see validation/README.md).

The run needs numpy and pandas (AttAcc's own requirements) in the interpreter that runs it, and
takes tens of minutes (one Ramulator2 run per PIM point). It shows progress and resumes: finished
points are kept in ``<table>.partial.jsonl`` until the table is complete.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from common.paths import write_whole

HERE = Path(__file__).resolve().parent
TABLES = HERE / "tables"
SCHEMA = "saddle-validation/1"

# AttAcc's A100 preset is the HBM3 "A100a" at 3352 GB/s; the paper's A100 has 2039 GB/s
# (SADDLE (HPCA 2026), evaluation), so every GPU point overrides the bandwidth.
A100_BANDWIDTH = 2039e9
GPUS = 8
STACKS_PER_GPU = 5

# Step points: the models in AttAcc's layer model (it has no GQA, so Llama-3.1-70B is run with
# one KV head per query head, as AttAcc models every LLaMA), systems, batches, contexts.
MODELS = {
    # name: (AttAcc model name, layers, hidden, heads, head dim, FFN / hidden)
    "opt-66b": ("OPT-66B", 64, 9216, 72, 128, 4),
    "opt-175b": ("OPT-175B", 96, 12288, 96, 128, 4),
    "llama-3.1-70b": ("LLAMA-3.1-70B", 80, 8192, 64, 128, 28672 / 8192),
}
STEP_BATCHES = (1, 4, 16, 32, 64, 128)
STEP_CONTEXTS = (128, 512, 1024, 2048, 4096)
STEP_SYSTEMS = (("dgx", False), ("attacc", False), ("attacc", True))

# PIM attention points: heads on one stack, context, head dim, power constraint.
PIM_HEADS = (1, 2, 4, 8, 15, 16, 17, 24, 32, 48, 64, 96, 128, 192, 256)
PIM_CONTEXTS = (128, 256, 512, 1024, 2048, 4096)
# (power constraint, head dim) blocks.
PIM_BLOCKS = ((False, 64), (False, 128), (True, 64), (True, 128))

STEP_COLUMNS = ("model", "system", "power_constraint", "batch", "context",
                "total_ns", "attention_ns", "fc_ns", "comm_ns", "other_ns",
                "qkv_ns", "proj_ns", "ff_ns", "allreduce_ns", "gpu_pim_ns", "softmax_ns",
                "act_ns", "norm_ns", "energy_pj", "offchip_pj", "l2_pj", "l1_pj", "reg_pj",
                "alu_pj", "comm_pj")
PIM_COLUMNS = ("heads", "context", "head_dim", "power_constraint", "cycles", "mac", "softmax",
               "mvgb", "mvsb", "wrgb")


def git_commit(path: Path) -> str:
    """The commit of a checkout (a work tree or a bare mirror), or what the caller passed."""
    out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{path}: not a git checkout; pass --attacc-commit / --ramulator-commit")
    return out.stdout.strip()


class Progress:
    """Finished points of one table in a JSON-lines side file, so an interrupted run resumes;
    with ``--extend``, also the rows of the existing table made from the same sources (a grid
    grown in ``regenerate.py`` computes only its new points)."""

    def __init__(self, table: Path, total: int, key, sources: dict | None = None):
        self.path = table.with_suffix(".partial.jsonl")
        self.done: dict[str, list] = {}
        if sources is not None and table.exists():
            old = json.loads(table.read_text())
            if old.get("sources") != sources:
                raise SystemExit(f"{table}: made from other sources; --extend needs the same commits")
            self.done = {key(*row): row for row in old["rows"]}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                key, row = json.loads(line)
                self.done[key] = row
        self.total = total

    def add(self, key: str, row: list) -> None:
        self.done[key] = row
        with self.path.open("a") as f:
            f.write(json.dumps([key, row]) + "\n")
        print(f"  [{len(self.done)}/{self.total}] {key}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def attacc_modules(src: Path, ramulator: Path):
    """AttAcc's modules imported from ``src``, run in a scratch folder whose ``ramulator2`` is
    the built work tree and whose ``ramulator.out`` (AttAcc's cycle cache) starts empty, so
    every PIM cycle count comes from a fresh Ramulator2 run."""
    sys.path.insert(0, str(src))
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(ramulator, Path(tmp) / "ramulator2")
        # AttAcc runs its trace generator as `python ...`: this interpreter.
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        os.chdir(tmp)
        try:
            import src.config as config  # AttAcc's modules
            import src.ramulator_wrapper as wrapper
            import src.system as system
            import src.type as types
            yield config, system, types, wrapper
        finally:
            os.chdir(cwd)


def model_info(types, name: str) -> dict:
    attacc_name, layers, hidden, heads, head_dim, ff_scale = MODELS[name]
    return {"name": attacc_name, "ndec": layers, "hdim": hidden, "num_heads": heads,
            "dhead": head_dim, "ff_scale": ff_scale, "gqa_size": 1, "dtype": types.DataType.W16A16}


def step_point(mods, model: str, system_name: str, pc: bool, batch: int, context: int) -> list:
    config, system, types, _ = mods
    info = model_info(types, model)
    xpu = config.make_xpu_config(types.GPUType.A100a, num_gpu=GPUS, mem_cap=80 * 2**30,
                                 mem_bw=A100_BANDWIDTH)
    s = system.System(xpu["GPU"], info)
    if system_name == "attacc":
        pim = config.make_pim_config(types.PIMType.BA, types.InterfaceType.NVLINK3,
                                     power_constraint=pc)
        s.set_accelerator(info, types.DeviceType.PIM, pim)
    perfs = []
    with contextlib.redirect_stdout(sys.stderr):
        # One generation step at context L: lin = L - 1 prompt tokens, lout = 2.
        s.simulate(batch, context - 1, 2, perfs=perfs, pipe=False, parallel_ff=False,
                   power_constraint=pc)
    _, _, perf, energy = perfs[0]
    g = dict(zip(("all", "matmul", "fc", "comm", "etc", "qkv", "prj", "ff", "g2g", "x2g",
                  "softmax", "act", "norm"), perf[7:]))
    ms = lambda v: v * 1e6                          # AttAcc prints ms: ns
    nj = lambda v: v * 1e3                          # and nJ: pJ
    all_e, off, l2, l1, reg, alu = energy[:6]
    return [model, system_name, pc, batch, context,
            ms(g["all"]), ms(g["matmul"] + g["softmax"]), ms(g["fc"]), ms(g["comm"]), ms(g["etc"]),
            ms(g["qkv"]), ms(g["prj"]), ms(g["ff"]), ms(g["g2g"]), ms(g["x2g"]), ms(g["softmax"]),
            ms(g["act"]), ms(g["norm"]), nj(all_e), nj(off), nj(l2), nj(l1), nj(reg), nj(alu),
            nj(energy[12])]


def pim_point(mods, ramulator_dir: Path, heads: int, context: int, head_dim: int,
              pc: bool) -> list:
    """``heads`` attention heads of ``context`` keys on one stack, as AttAcc's wrapper runs
    them (its trace generator, then Ramulator2)."""
    _, _, types, wrapper = mods
    ram = wrapper.Ramulator({"num_heads": heads, "dhead": head_dim}, str(ramulator_dir),
                            "ramulator.out", num_hbm=1)
    name = f"saddle_l{context}_nattn{heads}_dhead{head_dim}_pc{int(pc)}"
    yaml_file = ramulator_dir / f"{name}.yaml"
    ram.make_yaml_file(str(yaml_file), name, pc)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            cycle, mac, sfm, mvgb, mvsb, wrgb = ram.run_ramulator(
                types.PIMType.BA, context, heads, 2, str(yaml_file), name)
    finally:
        yaml_file.unlink(missing_ok=True)
    if cycle <= 0:
        raise SystemExit(f"Ramulator2 printed no memory_system_cycles for {name}")
    return [heads, context, head_dim, pc, cycle, mac, sfm, mvgb, mvsb, wrgb]


def pim_key(heads, context, head_dim, pc, *_) -> str:
    return f"h{heads}_L{context}_d{head_dim}_pc{int(pc)}"


def step_key(model, system, pc, batch, context, *_) -> str:
    return f"{model}_{system}_pc{int(pc)}_b{batch}_L{context}"


def write_table(path: Path, kind: str, columns, rows, sources: dict, command: str,
                parameters: dict) -> None:
    doc = {"schema": SCHEMA, "kind": kind, "sources": sources, "command": command,
           "parameters": parameters, "columns": list(columns), "rows": rows}
    write_whole(path, json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path} ({len(rows)} points)", file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attacc", type=Path, required=True, help="AttAcc simulator checkout")
    ap.add_argument("--ramulator", type=Path, required=True,
                    help="Ramulator2 work tree with AttAcc's patches, built (holds ramulator2)")
    ap.add_argument("--attacc-commit", help="commit of --attacc if it is not a git checkout")
    ap.add_argument("--ramulator-commit", help="commit of --ramulator if it is not a git checkout")
    ap.add_argument("--only", choices=("steps", "pim"), help="one table only")
    ap.add_argument("--extend", action="store_true",
                    help="keep the rows of the existing tables (same sources) and run only new points")
    ap.add_argument("--out", type=Path, default=TABLES, help=f"output folder (default {TABLES})")
    args = ap.parse_args(argv)
    src, ram_dir = args.attacc.resolve(), args.ramulator.resolve()
    if not (src / "src" / "system.py").exists():
        raise SystemExit(f"{src}: not AttAcc's simulator (no src/system.py)")
    if not (ram_dir / "ramulator2").is_file() or not (ram_dir / "trace_gen").is_dir():
        raise SystemExit(f"{ram_dir}: expected a built Ramulator2 work tree with AttAcc's "
                         "patches (ramulator2 binary and trace_gen/)")
    sources = {
        "attacc_simulator": {"repository": "https://github.com/scale-snu/attacc_simulator",
                             "commit": args.attacc_commit or git_commit(src), "license": "MIT"},
        "ramulator2": {"repository": "https://github.com/CMU-SAFARI/ramulator2",
                       "commit": args.ramulator_commit or git_commit(ram_dir), "license": "MIT",
                       "patches": "AttAcc's pim_ramulator_src/ applied by its set_pim_ramulator.sh"},
    }
    command = "python validation/regenerate.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    with attacc_modules(src, ram_dir) as mods:
        if args.only in (None, "pim"):
            table = args.out / "ramulator_pim_attention.json"
            points = [(h, L, d, pc) for pc, d in PIM_BLOCKS for h in PIM_HEADS
                      for L in PIM_CONTEXTS]
            prog = Progress(table, len(points), pim_key, sources if args.extend else None)
            for h, L, d, pc in points:
                if pim_key(h, L, d, pc) not in prog.done:
                    prog.add(pim_key(h, L, d, pc), pim_point(mods, ram_dir, h, L, d, pc))
            rows = [prog.done[pim_key(*p)] for p in points]
            write_table(table, "pim_attention", PIM_COLUMNS, rows, sources, command, {
                "pim": "bank-level (AttAcc_bank), one HBM3 stack of 16 channels, "
                       "HBM3_8Gb_2R, HBM3_5.2Gbps (power constraint) or HBM3_5.2Gbps_NPC, "
                       "all-bank refresh (AllBankHBM3), PIM scheduler",
                "trace": "AttAcc's trace_gen/gen_trace_attacc_bank.py --dhead D --nhead H "
                         "--seqlen L --dbyte 2 (one query, FP16, maxlen 4096)",
                "cycles": "memory_system_cycles, tCK = 0.769 ns",
                "heads": list(PIM_HEADS), "contexts": list(PIM_CONTEXTS),
                "blocks": [{"power_constraint": pc, "head_dim": d} for pc, d in PIM_BLOCKS]})
            prog.path.unlink()
        if args.only in (None, "steps"):
            table = args.out / "attacc_steps.json"
            points = [(m, s, pc, b, L) for m in MODELS for s, pc in STEP_SYSTEMS
                      for b in STEP_BATCHES for L in STEP_CONTEXTS]
            prog = Progress(table, len(points), step_key, sources if args.extend else None)
            for p in points:
                if step_key(*p) not in prog.done:
                    prog.add(step_key(*p), step_point(mods, *p))
            rows = [prog.done[step_key(*p)] for p in points]
            write_table(table, "decode_steps", STEP_COLUMNS, rows, sources, command, {
                "gpu": f"AttAcc's A100a preset with memory bandwidth overridden to "
                       f"{A100_BANDWIDTH / 1e9:.0f} GB/s (the paper's A100; the preset has "
                       f"3352), 80 GB, {GPUS} GPUs, tensor parallel",
                "pim": "dgx-attacc: AttAcc_bank, NVLink3 GPU-PIM interface, "
                       f"{STACKS_PER_GPU} stacks per GPU, power constraint as the column says",
                "options": "no --pipeopt, no --ffopt: FC on the GPUs, nothing overlapped "
                           "but what AttAcc always overlaps (GPU-PIM transfers with the "
                           "attention of other heads)",
                "step": "one generation step at context L (AttAcc --lin L-1 --lout 2): "
                        "times in ns, energy in pJ over all GPUs/stacks (dynamic only)",
                "models": {k: {"attacc_name": v[0], "layers": v[1], "hidden": v[2],
                               "heads": v[3], "head_dim": v[4], "ffn_scale": v[5]}
                           for k, v in MODELS.items()},
                "systems": [{"system": s, "power_constraint": pc} for s, pc in STEP_SYSTEMS],
                "batches": list(STEP_BATCHES), "contexts": list(STEP_CONTEXTS)})
            prog.path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
