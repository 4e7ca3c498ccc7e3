"""The layer rules of LAYOUT.md, checked by reading every import in spurctl/ and in the
simulator beside it (sim/spurctl_sim/, its own distribution).

The folders only mean something while nobody reaches across them: `decide/` stays
pure because it cannot import I/O, and `sources/` cannot start deciding because
it cannot import `decide/`. Every import counts here, including those inside
functions and under TYPE_CHECKING: an import deferred for start-up speed is still
a dependency. Import cycles are judged twice: at import time (which would deadlock
module initialisation), and over every import that runs, deferred ones too (two
modules that need each other are one tangle, whenever the second import happens).
An import under TYPE_CHECKING never runs: it names a type for the checker only, so
it is no edge of a cycle (the layer rules above still read it).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "spurctl"

DECIDE_MAY_IMPORT = ("spurctl.model", "spurctl.holdings", "spurctl.hostlist", "spurctl.errors")
USE_CASES = "spurctl.usecases"
# Above the use cases: what parses options or narrates, and calls them.
ENTRY_POINTS = ("spurctl.cli", "spurctl.demo", "spurctl.commands")
# What every use case starts from (run_audit), below them all.
SHARED_VIEW = "spurctl.audit_view"
SHARED_REPAIR = "spurctl.repair_view"
CLI_ENTRY_POINT = "spurctl.__main__"
# What runs on a node or a gateway (docs/layout.md): the admin side's layers are above it.
NODE_SIDE = "spurctl.node"
# The simulated cluster, for the demo, the tests and the benchmarks (docs/layout.md): a
# distribution of its own (sim/pyproject.toml), which an admin host's spurctl lacks.
SIMULATOR = "spurctl_sim"
# Where each package read here lives, relative to the repository.
PACKAGE_DIRS = {PACKAGE: Path(PACKAGE), SIMULATOR: Path("sim") / SIMULATOR}
# What runs the simulator: `spurctl demo` (the command, and the tour it narrates).
DEMO_COMMAND = ("spurctl.commands.demo", "spurctl.demo")


@dataclass(frozen=True, slots=True)
class Import:
    """One module named by one import statement."""

    path: str  # the importing file, relative to the repository, for messages
    line: int
    importer: str
    target: str
    at_import_time: bool  # neither inside a function nor under TYPE_CHECKING
    for_type_checking: bool  # under TYPE_CHECKING: read by the type checker only


@dataclass(frozen=True, slots=True)
class Module:
    name: str
    path: str
    source: str

    @property
    def is_package(self) -> bool:
        return self.path.endswith("__init__.py")


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def imports_of(module: Module, known: frozenset[str]) -> list[Import]:
    """Every module `module` imports, relative imports resolved.

    `from pkg import name` names `pkg.name` when that is a module of the
    package (`from spurctl import demo` imports spurctl.demo), else `pkg`.
    """
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    found: list[Import] = []

    def add(node: ast.stmt, target: str, at_import_time: bool, typing_only: bool) -> None:
        found.append(
            Import(module.path, node.lineno, module.name, target, at_import_time, typing_only)
        )

    def visit(node: ast.AST, at_import_time: bool, typing_only: bool = False) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name, at_import_time, typing_only)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                child = f"{source}.{alias.name}"
                add(node, child if child in known else source, at_import_time, typing_only)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, False, True)
            for child in node.orelse:
                visit(child, at_import_time, typing_only)
            return
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            at_import_time = False
        for child in ast.iter_child_nodes(node):
            visit(child, at_import_time, typing_only)

    visit(ast.parse(module.source, filename=module.path), True)
    return found


# -- the rules -------------------------------------------------------------------

Rule = Callable[[Import], str | None]


def _decide_is_pure(imp: Import) -> str | None:
    if not _within(imp.importer, "spurctl.decide"):
        return None
    target = imp.target
    if _within(target, "spurctl.decide") or target in DECIDE_MAY_IMPORT:
        return None
    if not _within(target, PACKAGE) and target.partition(".")[0] in sys.stdlib_module_names:
        return None
    return (
        "decide/ imports only spurctl.model, spurctl.holdings, spurctl.hostlist, "
        "spurctl.errors and the standard library (no I/O layer, no rich, typer, grpc or "
        "ClusterShell); "
        f"it imports {target}"
    )


def _sources_do_not_decide(imp: Import) -> str | None:
    if not _within(imp.importer, "spurctl.sources"):
        return None
    for banned in ("spurctl.decide", "spurctl.act", "spurctl.render", USE_CASES, *ENTRY_POINTS):
        if _within(imp.target, banned):
            return (
                "sources/ never imports decide/, act/, render/ or a use case; "
                f"it imports {imp.target}"
            )
    return None


def _node_side_stays_below(imp: Import) -> str | None:
    # node/ runs on a node or a gateway (the scan, the shipped scanner, the relay): it
    # never reaches up into what only the admin host runs.
    if not _within(imp.importer, NODE_SIDE):
        return None
    for banned in ("spurctl.decide", "spurctl.act", "spurctl.render", USE_CASES, SHARED_VIEW):
        if _within(imp.target, banned):
            return (
                "node/ never imports decide/, act/, render/, audit_view or a use case; "
                f"it imports {imp.target}"
            )
    for banned in ENTRY_POINTS:
        if _within(imp.target, banned):
            return f"node/ never imports cli, commands or demo; it imports {imp.target}"
    return None


def _render_only_renders(imp: Import) -> str | None:
    if not _within(imp.importer, "spurctl.render"):
        return None
    for banned in ("spurctl.sources", "spurctl.act"):
        if _within(imp.target, banned):
            return f"render/ never imports sources/ or act/; it imports {imp.target}"
    return None


def _use_cases_do_not_render(imp: Import) -> str | None:
    # The result says what happened; which renderer prints it is the caller's choice.
    if not _within(imp.importer, USE_CASES):
        return None
    for banned in ("spurctl.render", *ENTRY_POINTS):
        if _within(imp.target, banned):
            return f"usecases/ never imports render/, cli or demo; it imports {imp.target}"
    return None


def _use_cases_stand_alone(imp: Import) -> str | None:
    # Each use case is one command's whole job; what several share lives below them.
    if not (_within(imp.importer, USE_CASES) and _within(imp.target, USE_CASES)):
        return None
    parts = imp.importer.split("."), imp.target.split(".")
    if len(parts[0]) < 3 or len(parts[1]) < 3 or parts[0][2] == parts[1][2]:
        return None
    return f"a use case imports no other use case; {imp.importer} imports {imp.target}"


def _shared_view_is_below_the_use_cases(imp: Import) -> str | None:
    # repair_view (what repair and the autopilot's --repair share) sits beside it.
    shared = next((v for v in (SHARED_VIEW, SHARED_REPAIR) if _within(imp.importer, v)), None)
    if shared is None:
        return None
    for banned in ("spurctl.render", "spurctl.act", USE_CASES, *ENTRY_POINTS):
        if _within(imp.target, banned):
            return (
                f"{shared} sits below the use cases and only reads: it never imports "
                f"render/, act/, a use case or a command; it imports {imp.target}"
            )
    return None


def _only_cli_imports_commands(imp: Import) -> str | None:
    # A command module is the edge: nothing below it may reach back up into one.
    if not _within(imp.target, "spurctl.commands"):
        return None
    if imp.importer == "spurctl.cli" or _within(imp.importer, "spurctl.commands"):
        return None
    return f"only spurctl.cli imports spurctl/commands/; {imp.importer} does"


def _only_the_demo_runs_the_simulator(imp: Import) -> str | None:
    # The simulator (and its protobuf encoders) is what an admin host never needs, and its
    # spurctl may lack it: only `spurctl demo` starts it, inside its functions, so every
    # other command (and demo's --help) runs without it.
    if not _within(imp.target, SIMULATOR) or _within(imp.importer, SIMULATOR):
        return None
    if imp.importer in DEMO_COMMAND and not imp.at_import_time:
        return None
    where = "at import time" if imp.at_import_time else "in a function"
    return (
        f"only spurctl demo ({', '.join(DEMO_COMMAND)}) imports {SIMULATOR}, inside a "
        f"function; {imp.importer} does, {where}"
    )


def _nothing_imports_cli(imp: Import) -> str | None:
    # demo is the one most tempted (it narrates the commands); it is covered here too.
    if imp.target == "spurctl.cli" and imp.importer != CLI_ENTRY_POINT:
        return f"nothing imports spurctl.cli but {CLI_ENTRY_POINT}; {imp.importer} does"
    return None


RULES: Mapping[str, Rule] = {
    "decide-is-pure": _decide_is_pure,
    "sources-do-not-decide": _sources_do_not_decide,
    "node-side-stays-below": _node_side_stays_below,
    "render-only-renders": _render_only_renders,
    "use-cases-do-not-render": _use_cases_do_not_render,
    "nothing-imports-cli": _nothing_imports_cli,
    "only-the-demo-runs-the-simulator": _only_the_demo_runs_the_simulator,
    "shared-view-below-use-cases": _shared_view_is_below_the_use_cases,
    "only-cli-imports-commands": _only_cli_imports_commands,
    "use-cases-stand-alone": _use_cases_stand_alone,
}


def violations(imports: Iterable[Import], rule: Rule) -> list[str]:
    out: list[str] = []
    for imp in imports:
        broken = rule(imp)
        # `from x import a, b` is one statement: one message, not one per name.
        if broken is not None and f"{imp.path}:{imp.line}: {broken}" not in out:
            out.append(f"{imp.path}:{imp.line}: {broken}")
    return out


def at_import_time(imp: Import) -> bool:
    return imp.at_import_time


def runs(imp: Import) -> bool:
    """At import time or later, in a function: every import but TYPE_CHECKING's."""
    return not imp.for_type_checking


def cycles(
    imports: Iterable[Import], counts: Callable[[Import], bool] = at_import_time
) -> list[str]:
    """One line per import cycle among spurctl modules, over the imports that `counts`
    (at import time unless told), with file:line per step.

    Each strongly connected component of the import graph is one tangle; it is
    shown as one shortest cycle through its first module, which is enough to
    know where to cut. A step made inside a function says so.
    """
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports:
        if counts(imp) and _read_here(imp.target) and imp.target != imp.importer:
            # An import at import time stands for the pair before a deferred one.
            known = edges.setdefault(imp.importer, {}).setdefault(imp.target, imp)
            if imp.at_import_time and not known.at_import_time:
                edges[imp.importer][imp.target] = imp
    out = []
    for component in _strongly_connected(edges):
        if len(component) < 2:
            continue
        start = min(component)
        steps = _shortest_cycle(start, edges, component)
        where = " -> ".join(
            f"{s.importer} ({s.path}:{s.line}{'' if s.at_import_time else ', in a function'})"
            for s in steps
        )
        out.append(f"import cycle: {where} -> {start}")
    return out


def _strongly_connected(edges: Mapping[str, Mapping[str, Import]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph is small, but recursion limits are not)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


def _shortest_cycle(
    start: str, edges: Mapping[str, Mapping[str, Import]], component: set[str]
) -> list[Import]:
    came_by: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target, imp in sorted(edges.get(node, {}).items()):
                if target not in component:
                    continue
                if target == start:
                    path = [imp]
                    while path[0].importer != start:
                        path.insert(0, came_by[path[0].importer])
                    return path
                if target not in came_by:
                    came_by[target] = imp
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected component but on no cycle")


# -- the package as it is --------------------------------------------------------


def _read_here(name: str) -> bool:
    return any(_within(name, package) for package in PACKAGE_DIRS)


def package_modules() -> list[Module]:
    modules = []
    for package, directory in PACKAGE_DIRS.items():
        for path in sorted((ROOT / directory).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / directory).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            relative = str(path.relative_to(ROOT))
            modules.append(Module(".".join(parts), relative, path.read_text(encoding="utf-8")))
    return modules


def all_imports(modules: list[Module]) -> list[Import]:
    known = frozenset(m.name for m in modules)
    return [imp for m in modules for imp in imports_of(m, known)]


@pytest.fixture(scope="module")
def spurctl_imports() -> list[Import]:
    return all_imports(package_modules())


@pytest.mark.parametrize("name", sorted(RULES))
def test_layer_rule_holds(name: str, spurctl_imports: list[Import]) -> None:
    broken = violations(spurctl_imports, RULES[name])
    assert not broken, f"rule {name} broken:\n" + "\n".join(broken)


# What render/ never does (docs/layout.md, "One exit"): it only writes. The terminal's
# facts come in one Environment, the prompt is the command's, and so are the exit status
# and the signals.
RENDER_NEVER = {
    "probes the terminal": (".isatty(", "get_terminal_size("),
    "reads standard input": ("sys.stdin",),
    "installs a signal handler": ("signal.signal(",),
    "ends the process": ("sys.exit(", "os._exit(", "typer.Exit(", "raise SystemExit"),
}


def test_render_only_writes() -> None:
    broken = []
    for module in package_modules():
        if not _within(module.name, "spurctl.render"):
            continue
        for what, needles in RENDER_NEVER.items():
            for number, line in enumerate(module.source.splitlines(), 1):
                if any(n in line for n in needles) and not line.lstrip().startswith("#"):
                    broken.append(f"{module.path}:{number}: render/ never {what}: {line.strip()}")
    assert not broken, "\n".join(broken)


def test_no_import_cycles(spurctl_imports: list[Import]) -> None:
    found = cycles(spurctl_imports)
    assert not found, "\n".join(found)


def test_no_import_cycles_through_deferred_imports(spurctl_imports: list[Import]) -> None:
    # A function-level import hides a cycle from import time, not from the design: each
    # module of the pair still needs the other. Move what both need below them both.
    found = cycles(spurctl_imports, counts=runs)
    assert not found, "\n".join(found)


def test_every_layer_is_read() -> None:
    # A rule over a folder the reader never reaches would pass for the wrong reason.
    names = {m.name for m in package_modules()}
    for layer in (
        "spurctl.decide", "spurctl.sources", "spurctl.render", "spurctl.act", USE_CASES,
        NODE_SIDE, SIMULATOR,
    ):  # fmt: skip
        assert any(_within(n, layer) and n != layer for n in names), layer


# -- the checker itself, on made-up packages -------------------------------------


def _synthetic(sources: Mapping[str, str]) -> list[Import]:
    """Imports of a made-up package given as {path: source}."""
    modules = []
    for path, source in sources.items():
        parts = list(Path(path).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules.append(Module(".".join(parts), path, source))
    return all_imports(modules)


def test_checker_catches_a_function_level_import_in_decide() -> None:
    imports = _synthetic(
        {
            "spurctl/decide/plan.py": (
                "import json\n\ndef f():\n    from spurctl.sources import wire\n"
            ),
            "spurctl/sources/wire.py": "",
        }
    )
    assert violations(imports, RULES["decide-is-pure"]) == [
        "spurctl/decide/plan.py:4: decide/ imports only spurctl.model, spurctl.holdings, "
        "spurctl.hostlist, spurctl.errors and the standard library (no I/O layer, no rich, "
        "typer, grpc or ClusterShell); it imports spurctl.sources.wire"
    ]


def test_checker_catches_third_party_and_type_checking_imports_in_decide() -> None:
    imports = _synthetic(
        {
            "spurctl/decide/plan.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from rich.text import Text\n"
                "from ClusterShell.NodeSet import NodeSet\n"
            ),
        }
    )
    broken = violations(imports, RULES["decide-is-pure"])
    assert [b.split(":")[1] for b in broken] == ["3", "4"]


def test_checker_resolves_relative_imports() -> None:
    imports = _synthetic(
        {
            "spurctl/render/__init__.py": "",
            "spurctl/render/audit.py": "from ..act import journal\nfrom . import common\n",
            "spurctl/render/common.py": "",
            "spurctl/act/__init__.py": "",
            "spurctl/act/journal.py": "",
        }
    )
    targets = {i.target for i in imports}
    assert targets == {"spurctl.act.journal", "spurctl.render.common"}
    assert violations(imports, RULES["render-only-renders"]) == [
        "spurctl/render/audit.py:1: render/ never imports sources/ or act/; "
        "it imports spurctl.act.journal"
    ]


def test_checker_catches_a_use_case_imported_by_a_source() -> None:
    imports = _synthetic(
        {
            "spurctl/sources/inventories.py": "from spurctl.usecases import audit\n",
            "spurctl/usecases/audit.py": "",
        }
    )
    assert len(violations(imports, RULES["sources-do-not-decide"])) == 1


def test_checker_catches_the_node_side_reaching_up() -> None:
    imports = _synthetic(
        {
            "spurctl/node/node_scan.py": (
                "from spurctl.holdings import Inventory\n"
                "from spurctl.node import node_files\n"
                "def f():\n    from spurctl.decide import classify\n"
                "from spurctl.commands import collect\n"
            ),
            "spurctl/node/node_files.py": "",
            "spurctl/decide/classify.py": "",
            "spurctl/commands/collect.py": "",
        }
    )
    assert [b.split(":")[1] for b in violations(imports, RULES["node-side-stays-below"])] == [
        "4",
        "5",
    ]


def test_checker_catches_a_use_case_that_renders() -> None:
    imports = _synthetic(
        {
            "spurctl/usecases/reclaim.py": "def f():\n    from spurctl.render import reclaim\n",
            "spurctl/render/reclaim.py": "",
        }
    )
    assert violations(imports, RULES["use-cases-do-not-render"]) == [
        "spurctl/usecases/reclaim.py:2: usecases/ never imports render/, cli or demo; "
        "it imports spurctl.render.reclaim"
    ]


def test_checker_catches_a_use_case_importing_another() -> None:
    imports = _synthetic(
        {
            "spurctl/usecases/__init__.py": "",
            "spurctl/usecases/explain.py": "from spurctl.usecases.audit import run_audit\n",
            "spurctl/usecases/audit.py": "from spurctl.usecases import audit\n",
        }
    )
    assert violations(imports, RULES["use-cases-stand-alone"]) == [
        "spurctl/usecases/explain.py:1: a use case imports no other use case; "
        "spurctl.usecases.explain imports spurctl.usecases.audit"
    ]


def test_checker_lets_only_the_entry_point_import_cli() -> None:
    imports = _synthetic(
        {
            "spurctl/cli.py": "",
            "spurctl/__main__.py": "from spurctl.cli import main\n",
            "spurctl/demo.py": "def run():\n    from spurctl import cli\n",
        }
    )
    assert violations(imports, RULES["nothing-imports-cli"]) == [
        "spurctl/demo.py:2: nothing imports spurctl.cli but spurctl.__main__; spurctl.demo does"
    ]


def test_checker_lets_only_the_demo_command_import_the_simulator_in_a_function() -> None:
    imports = _synthetic(
        {
            "spurctl/demo.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from spurctl_sim import SimCluster\n"
                "def run():\n    from spurctl_sim import SimCluster\n"
            ),
            "spurctl/commands/demo.py": "def command():\n    import spurctl_sim\n",
            "spurctl/commands/audit.py": "def command():\n    import spurctl_sim\n",
            "spurctl/cli.py": "from spurctl_sim import incident\n",
            "spurctl_sim/__init__.py": "from spurctl_sim.encoders import job_to_pb\n",
            "spurctl_sim/encoders.py": "",
            "spurctl/sources/controller.py": "from spurctl_sim.encoders import job_to_pb\n",
        }
    )
    assert violations(imports, RULES["only-the-demo-runs-the-simulator"]) == [
        "spurctl/commands/audit.py:2: only spurctl demo (spurctl.commands.demo, spurctl.demo) "
        "imports spurctl_sim, inside a function; spurctl.commands.audit does, in a function",
        "spurctl/cli.py:1: only spurctl demo (spurctl.commands.demo, spurctl.demo) "
        "imports spurctl_sim, inside a function; spurctl.cli does, at import time",
        "spurctl/sources/controller.py:1: only spurctl demo (spurctl.commands.demo, "
        "spurctl.demo) imports spurctl_sim, inside a function; spurctl.sources.controller "
        "does, at import time",
    ]
    # Not even the demo at import time: `spurctl demo --help` needs no simulator.
    top = _synthetic({"spurctl/demo.py": "from spurctl_sim import SimCluster\n"})
    assert len(violations(top, RULES["only-the-demo-runs-the-simulator"])) == 1


def test_checker_passes_a_clean_package() -> None:
    imports = _synthetic(
        {
            "spurctl/model.py": "import enum\n",
            "spurctl/decide/classify.py": (
                "from spurctl.model import Kind\nfrom spurctl import hostlist\n"
            ),
            "spurctl/hostlist.py": "from ClusterShell.NodeSet import NodeSet\n",
            "spurctl/sources/wire.py": "from spurctl.model import Job\nimport grpc\n",
            "spurctl/render/audit.py": "from spurctl.decide import classify\nimport rich\n",
            "spurctl/usecases/audit.py": (
                "from spurctl.sources import wire\nfrom spurctl.decide import classify\n"
            ),
        }
    )
    for rule in RULES.values():
        assert violations(imports, rule) == []
    assert cycles(imports) == []


def test_checker_finds_a_cycle_but_not_a_deferred_one() -> None:
    imports = _synthetic(
        {
            "spurctl/audit.py": "from spurctl import reclaim\n",
            "spurctl/reclaim.py": "import os\nfrom spurctl.audit import gather\n",
            "spurctl/checklist.py": "def f():\n    from spurctl import reclaim\n",
            "spurctl/model.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from spurctl import checklist\n"
            ),
        }
    )
    assert cycles(imports) == [
        "import cycle: spurctl.audit (spurctl/audit.py:1) -> "
        "spurctl.reclaim (spurctl/reclaim.py:2) -> spurctl.audit"
    ]


def test_checker_finds_a_deferred_cycle_but_not_a_type_checking_one() -> None:
    imports = _synthetic(
        {
            "spurctl/settings.py": "def f():\n    from spurctl import binding\n",
            "spurctl/binding.py": "from spurctl.settings import normalize\n",
            "spurctl/state.py": "from spurctl import restarts\n",
            "spurctl/restarts.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from spurctl.state import ClusterState\n"
            ),
        }
    )
    assert cycles(imports) == []
    assert cycles(imports, counts=runs) == [
        "import cycle: spurctl.binding (spurctl/binding.py:1) -> "
        "spurctl.settings (spurctl/settings.py:2, in a function) -> spurctl.binding"
    ]
