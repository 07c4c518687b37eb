"""The packages' import graph: no module imports itself through others, the trace tools stand
on their own (``traces/`` imports ``common/``, never ``sim/``), and the simulator does not
import what stands beside it (``hw/``, ``validation/``, ``tuning/``). Every import counts,
module-level and inside functions: a deferred import hides a circle, it does not remove it.
Imports under ``if TYPE_CHECKING:`` are annotations only, never executed, and do not count."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "hw", "report", "sim", "traces", "tuning", "validation")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports (a package's ``__init__`` only when it imports a
    name defined there, as import checkers count it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(n) for block in ast.walk(tree) if _type_checking(block)
                   for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # ``from a import b``: module a.b when b is one, else a (b is a name in it)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    graph = _graph()
    assert _circles(graph) == []


def test_traces_do_not_import_the_simulator():
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("traces")
                   for t in targets if t == "sim" or t.startswith("sim."))
    assert wrong == []


def test_the_simulator_imports_neither_the_rtl_nor_its_validation():
    """``sim/cli.py`` names their command modules as strings (``SUBCOMMAND_MODULES``)."""
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("sim")
                   for t in targets if t.split(".")[0] in ("hw", "tuning", "validation"))
    assert wrong == []


def test_common_imports_nothing_of_the_project_but_itself():
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("common")
                   for t in targets if not t.startswith("common"))
    assert wrong == []


def test_the_graph_sees_function_level_imports():
    """A check of the checker: a deferred import is an edge."""
    graph = _graph()
    assert "traces.synth" in graph["sim.systems.resolve"]     # inside RunParams.trace_path
