"""Facts with one source: status names come from ``jobs.states``; imports stay at module level
unless a comment says which cycle or optional dependency keeps one in a function; and the
module-level imports of the package form no cycle."""

import ast
import re
from pathlib import Path

from jobs.states import Status

JOBS = Path(__file__).resolve().parents[2] / "jobs"
STATUS_NAMES = {status.value for status in Status}
# A string equal to a status name that is something else (a verb, an event) says so on its line.
NOT_A_STATUS = "not a status"
# The comment of a function-level import names its reason: a cycle, an optional dependency, or
# the app registry (a module imported before models may be: apps.py, the task backend).
IMPORT_REASON = re.compile(r"#.*\b(cycle|optional|app registry)\b", re.IGNORECASE)


def python_modules():
    """Yield (dotted name, path) of every module of the package, migrations excepted."""
    for path in sorted(JOBS.rglob("*.py")):
        relative = path.relative_to(JOBS.parent).with_suffix("")
        if "migrations" in relative.parts:
            continue
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        yield ".".join(parts), path


def bare_status_names(path: Path) -> list[str]:
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in STATUS_NAMES:
            line = lines[node.lineno - 1]
            if NOT_A_STATUS not in line:
                found.append(f"{path.name}:{node.lineno}: {line.strip()}")
    return found


def test_status_names_are_spelled_only_in_the_states_table():
    found = []
    for name, path in python_modules():
        if name != "jobs.states":
            found += bare_status_names(path)
    assert found == [], "use jobs.states.Status (or a named set of jobs.states):\n" + "\n".join(
        found
    )


def test_the_check_finds_a_bare_status_name(tmp_path):
    module = tmp_path / "module.py"
    module.write_text('if task.status == "running":\n    verb = "cancelled"  # not a status\n')
    assert len(bare_status_names(module)) == 1


def test_scripts_and_templates_name_no_status():
    # The page knows a final status from data-finished (jobs.states.TERMINAL), not from names.
    pattern = re.compile(r"""["']({})["']""".format("|".join(sorted(STATUS_NAMES))))
    found = [
        f"{path.relative_to(JOBS.parent)}: {match.group(0)}"
        for folder in ("static", "templates")
        for path in sorted((JOBS / folder).rglob("*"))
        if path.suffix in (".js", ".html")
        for match in pattern.finditer(path.read_text())
    ]
    assert found == []


def imports(path: Path, module: str):
    """Yield (imported module, at module level?, line) for each ``jobs`` import of ``path``."""
    source = path.read_text()
    # An import's line, with the line above it: where a comment gives the reason.
    lines = [
        f"{above}\n{line}"
        for above, line in zip(["", *source.splitlines()], source.splitlines(), strict=False)
    ]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue  # imports for annotations only: never run
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, in_function, lines[child.lineno - 1]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1])
                    base = f"{base}.{child.module}" if child.module else base
                for alias in child.names:
                    # "from jobs import limits" imports the module jobs.limits.
                    yield f"{base}.{alias.name}", in_function, lines[child.lineno - 1]
                    yield base, in_function, lines[child.lineno - 1]
            else:
                yield from visit(child, nested)

    for name, in_function, line in visit(ast.parse(source), False):
        if name == "jobs" or name.startswith("jobs."):
            yield name, in_function, line


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def test_an_import_in_a_function_says_which_cycle_or_optional_dependency_it_defers():
    unexplained = {
        f"{module}: {line.strip().splitlines()[-1]}"
        for module, path in python_modules()
        for _, in_function, line in imports(path, module)
        if in_function and not IMPORT_REASON.search(line)
    }
    assert sorted(unexplained) == []


def module_graph() -> dict[str, set[str]]:
    """Map each module of the package to the package's modules it imports at module level."""
    modules = dict(python_modules())
    graph = {}
    for module, path in modules.items():
        graph[module] = {
            name
            for name, in_function, _ in imports(path, module)
            if not in_function and name in modules and name != module
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return one cycle through each strongly connected group of ``graph`` (Tarjan), if any."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in sorted(graph.get(node, ())):
            if after not in index:
                connect(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_module_level_imports_of_the_package_form_no_cycle():
    # A package imports its parent package first (jobs.worker.pool runs jobs.worker/__init__),
    # so an __init__ that imports its own submodules is no cycle of ours: drop those edges.
    graph = {
        module: {name for name in imported if not module.startswith(name + ".")}
        for module, imported in module_graph().items()
    }
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_check_sees_a_function_level_import_and_its_reason(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "from jobs import states\n\n\ndef f():\n    from jobs import models\n\n\n"
        "def g():\n    # a cycle: jobs.signals imports this module\n    from jobs import signals\n"
    )
    found = [(name, in_function) for name, in_function, _ in imports(module, "jobs.module")]
    assert ("jobs.states", False) in found
    assert ("jobs.models", True) in found
    reasons = [
        bool(IMPORT_REASON.search(line)) for _, f, line in imports(module, "jobs.module") if f
    ]
    assert reasons == [False, False, True, True]  # "from jobs import x" yields jobs.x and jobs
