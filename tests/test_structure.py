"""The structure ARCHITECTURE.md promises, checked: small functions in sim/, no module-level
caches in the cost models or the engine (caches are objects a run owns), no string-keyed
scratchpads in run state, sim/ below its line budget."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "sim"
MAX_FUNCTION_LINES = 80
SIM_LINE_BUDGET = 9000
CACHE_DECORATORS = {"lru_cache", "cache", "cached_property"}


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def test_no_function_in_sim_is_over_80_lines():
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in _modules(SIM) for node in ast.walk(_tree(path))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def test_no_module_level_caches_in_the_cost_models_or_the_engine():
    found = []
    for folder in (SIM / "cost", SIM / "engine"):
        for path in _modules(folder):
            tree = _tree(path)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    found += [f"{path.relative_to(ROOT)}:{node.lineno} @{_decorator_name(d)}"
                              for d in node.decorator_list
                              if _decorator_name(d) in CACHE_DECORATORS - {"cached_property"}]
            for node in tree.body:      # a mutable container bound at module level
                if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(
                        node.value, ast.Dict | ast.List | ast.Set | ast.DictComp):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [t.id for t in targets if isinstance(t, ast.Name)]
                    if any(n.startswith("_") and not n.startswith("__") and not n.isupper() for n in names):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {names}")
    assert not found, found


def test_run_state_has_no_extra_scratchpad():
    """No class in sim/ keeps a string-keyed ``extra`` field or attribute (a trace's free JSON
    fields, ``RequestTrace.extra``, are the trace format's, read but never written here)."""
    found = []
    for path in _modules(SIM):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                found += [f"{path.relative_to(ROOT)}:{item.lineno}" for item in node.body
                          if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                          and item.target.id == "extra"]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found += [f"{path.relative_to(ROOT)}:{node.lineno}" for t in targets
                          if isinstance(t, ast.Attribute) and t.attr == "extra"]
    assert not found, found


def test_sim_is_within_its_line_budget():
    lines = sum(len(p.read_text().splitlines()) for p in _modules(SIM))
    assert lines < SIM_LINE_BUDGET, lines
