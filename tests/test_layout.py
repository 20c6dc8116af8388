"""The two sides of the repository stay apart, and no graded answer ships in the package.

- ``course/`` (the notebook side) runs in the student's kernel: it never imports nbgrader or
  the grader;
- ``grader/`` (the ``course`` command) runs in the instructor's process: it never imports torch
  or the notebook side;
- the judge (``judge/``) never imports the grader or nbgrader, and no file of ``course/`` or
  ``judge/`` names ``grader`` in an import, even one inside a function;
- ``grader/`` has no import cycle, and every import made inside a function says why in a
  comment; no module of ``course/``, ``grader/`` or ``judge/`` is over 500 lines, no function
  over 60;
- each test cell is declared once, in its probe's table ``CELLS``;
- the public functions of the checks modules follow the verbs of CONTRIBUTING.md: a
  ``diagnose_X`` or ``observe_X`` takes code, a ``diagnose_X_result`` or ``_value`` what it
  returned (``got``), a ``diagnose_X_facts`` the facts read of it, a ``judge_X`` or ``check_X`` an
  observation or a value, and ``X_cases`` a seed;
- ``course/`` has one subpackage per assignment, mirroring ``source/`` and ``demo/``;
- no module of ``course/`` defines a graded function or class, under its name or under the
  names its copies once had there.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import course
import grader
from tests.conftest import ASSIGNMENTS, REPO

# Names that graded answers once had in the package (issue: answers importable from `course`).
FORMER_COPIES = {"causal_mask", "TransformerLM", "PositionalEncoding", "_rows", "count_parameters"}


def modules(package) -> list[str]:
    return sorted(
        m.name for m in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
    )


def imported_after(names: list[str], whole: bool = False) -> set[str]:
    """Top-level module names (``whole``: full names) that a fresh interpreter holds after
    importing ``names``."""
    kept = "m" if whole else "m.split('.')[0]"
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted({{{kept} for m in sys.modules}})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout))


def test_the_grader_never_imports_torch_or_the_notebook_side() -> None:
    """Of the notebook side, the grader imports the verification contract and the one runner of
    ``course check`` only (both the standard library alone)."""
    loaded = imported_after(modules(grader), whole=True)
    assert "grader" in loaded and "torch" not in loaded
    allowed = {"course", "course.contract", "course.check"}  # the contract; the check's runner
    assert {m for m in loaded if m.split(".")[0] == "course"} == allowed


def test_reading_a_notebook_loads_no_iri_parser() -> None:
    """nbformat's jsonschema does not load rfc3987-syntax, which builds its parsers at import
    (1.2 s a process: constraints.txt holds jsonschema below 4.25 for it)."""
    assert "rfc3987_syntax" not in imported_after(["nbformat", "nbgrader.api"])


def test_the_contract_is_standard_library_only() -> None:
    """course.contract, which the grader, the kernel and the judge share, imports nothing but
    the standard library (and course/__init__, which imports nothing)."""
    added = imported_after(["course.contract"]) - imported_after([])
    assert added - set(sys.stdlib_module_names) == {"course"}, added


def test_the_notebook_side_never_imports_nbgrader_or_the_grader() -> None:
    loaded = imported_after(modules(course))
    assert "torch" in loaded and "course" in loaded
    assert not loaded & {"nbgrader", "grader"}, loaded & {"nbgrader", "grader"}


def test_the_judge_never_imports_nbgrader_or_the_grader() -> None:
    """The trusted judge (``judge/``) reads observations with torch and the course's checks."""
    import judge

    loaded = imported_after(modules(judge))
    assert "torch" in loaded and "judge" in loaded
    assert not loaded & {"nbgrader", "grader"}, loaded & {"nbgrader", "grader"}
    assert "judge" not in imported_after(modules(course)), "the kernel side imports the judge"


def imports_of(path: Path) -> list[tuple[str, ast.AST, bool]]:
    """Every module ``path`` imports (absolute names), the import's node, and whether the import
    sits inside a function (a lazy import)."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child, inside) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.module, child, inside))
                # `from grader import cluster` imports the module grader.coordinator.cluster
                found.extend((f"{child.module}.{a.name}", child, inside) for a in child.names)
            visit(child, inside)

    visit(tree, False)
    return found


def module_name(path: Path) -> str:
    """grader/warm/pool.py -> grader.warm.pool; grader/lms/__init__.py -> grader.lms."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def grader_graph() -> dict[str, set[str]]:
    """Module of grader/ -> the modules of grader/ it imports (anywhere in the file)."""
    paths = list((REPO / "grader").rglob("*.py"))
    names = {module_name(p) for p in paths}
    return {
        module_name(p): {n for n, _, _ in imports_of(p) if n in names} - {module_name(p)}
        for p in paths
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``, each as the path that closes it."""
    found, state = [], {}

    def walk(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                walk(target, [*path, target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return found


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_grader_has_no_import_cycle() -> None:
    graph = grader_graph()
    assert len(graph) > 10 and "grader.coordinator.grading" in graph["grader.coordinator.autograde"]
    assert cycles(graph) == [], "import cycles in grader/"


# Which packages each package of grader/ may import (grader/__init__.py says what runs where).
# nbgrader's plugins never import the coordinator; the coordinator names the plugins
# (nbgrader_config.py, command lines), never imports them. The `course` command's own process is
# in floors, each importing only the floors below it: books; coordinator (grading a class) and
# lms; term, report and selfstudy; command (the command line) on top.
MAY_IMPORT = {
    "shared": {"shared"},
    "sandbox": {"shared", "sandbox"},
    "nbgrader": {"shared", "sandbox", "nbgrader", "warm.wire"},
    "warm": {"shared", "sandbox", "warm"},
    "books": {"shared", "books"},
    "coordinator": {"shared", "sandbox", "warm", "books", "coordinator"},
    "lms": {"shared", "books", "lms"},
    "term": {"shared", "books", "coordinator", "lms", "term"},
    "report": {"shared", "books", "coordinator", "report"},
    "selfstudy": {"shared", "selfstudy"},
    "command": {"shared", "warm", "books", "coordinator", "lms", "term", "report", "selfstudy"}
    | {"command"},
}
# The nbgrader fork server becomes nbgrader's process: it loads nbgrader's entry point.
ALSO = {("grader.warm.forkserver", "grader.nbgrader.main")}


def package_of(module: str) -> str:
    """grader.warm.pool -> warm; grader.warm.wire -> warm.wire where a rule names it."""
    parts = module.split(".")
    two = ".".join(parts[1:3])
    return two if any(two in allowed for allowed in MAY_IMPORT.values()) else parts[1]


def test_no_process_imports_another_s_code() -> None:
    graph = grader_graph()
    assert set(MAY_IMPORT) == {m.split(".")[1] for m in graph if m.count(".") >= 2}
    crossing = [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        if module.count(".") >= 2
        for target in sorted(targets)
        if target.count(".") >= 2
        and (module, target) not in ALSO
        and not any(
            package_of(target) == allowed or package_of(target).startswith(allowed + ".")
            for allowed in MAY_IMPORT[package_of(module).split(".")[0]]
        )
    ]
    assert not crossing, "\n".join(crossing)


def test_the_coordinator_loads_no_nbgrader_plugin() -> None:
    """What ``course autograde`` imports (the coordinator's modules) leaves grader.nbgrader out."""
    code = (
        "import sys\n"
        "import grader.coordinator.autograde, grader.command.cli, grader.selfstudy.check\n"
        "print(sorted(m for m in sys.modules if m.startswith('grader.nbgrader')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def course_graph() -> dict[str, set[str]]:
    """Module of course/ -> the modules of course/ it imports (anywhere in the file)."""

    def name(path: Path) -> str:
        parts = path.relative_to(REPO).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    paths = list((REPO / "course").rglob("*.py"))
    names = {name(p) for p in paths}
    return {name(p): {n for n, _, _ in imports_of(p) if n in names} - {name(p)} for p in paths}


def test_the_kernel_side_has_no_import_cycle() -> None:
    """Lazy imports included: a cycle hidden in a function is still a cycle of the design."""
    graph = course_graph()
    assert "course.e_pretraining.labelled" in graph["course.e_pretraining.together"]
    assert cycles(graph) == [], "import cycles in course/"


def test_the_module_map_is_the_codes() -> None:
    """docs/layout.md maps every module of course/, judge/ and grader/ as the code describes it."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import module_map
    finally:
        sys.path.remove(str(REPO / "tools"))
    text = (REPO / "docs" / "layout.md").read_text()
    mapped = [p.relative_to(REPO).as_posix() for p in module_map.modules()]
    assert "grader/command/cli.py" in mapped and "judge/core.py" in mapped and len(mapped) > 100
    missing = [m for m in mapped if f"`{m}`" not in text]
    assert not missing, f"not in docs/layout.md: {missing}: run python tools/module_map.py"
    assert module_map.rewritten(text) == text, "docs/layout.md's module map is stale: " + (
        "run python tools/module_map.py"
    )


def test_every_lazy_import_of_the_grader_says_why() -> None:
    """An import inside a function has a comment on its line or on the line just above."""
    unexplained = []
    for path in sorted((REPO / "grader").rglob("*.py")):
        lines = path.read_text().splitlines()
        for name, node, lazy in imports_of(path):
            if lazy and not any("#" in lines[i] for i in (node.lineno - 2, node.lineno - 1)):
                unexplained.append(f"{path.name}:{node.lineno} imports {name}")
    assert not unexplained, "\n".join(sorted(set(unexplained)))


@pytest.mark.parametrize("side", ["course", "judge"])
def test_the_kernel_side_and_the_judge_never_name_the_grader(side: str) -> None:
    """Statically, lazy imports included (the import tests above see only what loads)."""
    for path in sorted((REPO / side).rglob("*.py")):
        named = {name for name, _, _ in imports_of(path) if name.split(".")[0] == "grader"}
        assert not named, f"{path.relative_to(REPO)} imports {named}"


def test_modules_and_functions_stay_short() -> None:
    """No module of course/, grader/ or judge/ over 500 lines; no function over 60 (a screen)."""
    paths = [*(REPO / "course").rglob("*.py"), *(REPO / "grader").rglob("*.py")]
    for path in sorted([*paths, *(REPO / "judge").glob("*.py")]):
        text, name = path.read_text(), str(path.relative_to(REPO))
        assert len(text.splitlines()) <= 500, f"{name} is over 500 lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= 60, f"{name}: {node.name} has {length} lines"


# The annotations of a first parameter that is code: a function, a class, a module.
CODE = ("Callable", "nn.Module", "type[")
# Names that say a parameter is what code returned (a callable may give outputs too).
OUTPUTS = {"got", "out", "output", "outputs", "result", "results", "value", "values"}


def verb_problem(function: ast.FunctionDef) -> str | None:
    """What is wrong with the name or the first parameter of a public function of a checks
    module, by the verbs of CONTRIBUTING.md (None: nothing)."""
    name, params = function.name, function.args.args
    first = params[0].arg if params else ""
    annotation = ast.unparse(params[0].annotation) if params and params[0].annotation else ""
    code = annotation.startswith(CODE) and first not in OUTPUTS
    if name.startswith("diagnose_") and name.endswith(("_result", "_value")):
        return None if first == "got" else f"{name} decides on what the code returned: (got, ...)"
    if name.startswith("diagnose_") and name.endswith("_facts"):
        return None if first == "facts" else f"{name} decides on facts: (facts, ...)"
    if name.startswith(("diagnose_", "observe_")):
        if code:
            return None
        return (
            f"{name} takes {first or 'nothing'} ({annotation or 'no annotation'}), not code: a "
            "function that takes an output is diagnose_X_result(got, ...) (or _value, _facts)"
        )
    if name.startswith(("judge_", "check_")) and (code or not annotation):
        return f"{name} decides on an observation or a value, not on code ({first}: {annotation})"
    if name.endswith("_cases") and params and first != "seed":
        return f"{name} draws the hidden cases: (seed, ...)"
    return None


@pytest.mark.parametrize(
    ("source", "wrong"),
    [
        ("def diagnose_causal_mask(mask: object, sz: int): ...", True),
        ("def diagnose_causal_mask_result(got: object, sz: int): ...", False),
        ("def diagnose_split(out: torch.Tensor, x: torch.Tensor): ...", True),
        ("def diagnose_read_out(function: Callable, name: str): ...", False),
        ("def diagnose_frozen(model: nn.Module): ...", False),
        ("def diagnose_perplexity(perplexity_fn, mean_nll: float): ...", True),
        ("def diagnose_storage_sizes(sizes: dict, max_len: int): ...", True),
        ("def diagnose_head_facts(facts: dict, d_model: int): ...", False),
        ("def diagnose_count_value(value: object): ...", True),
        ("def diagnose_generator_runs(output: Callable[[int], object]): ...", True),
        ("def diagnose_mask_generator_result(got: Callable[[int], object]): ...", False),
        ("def observe_gpt(cls: Callable[..., nn.Module], case: dict): ...", False),
        ("def judge_gpt(got: object, case: dict): ...", False),
        ("def check_kqv(function: Callable, us: torch.Tensor): ...", True),
        ("def previous_token_cases(length: int): ...", True),
        ("def sample_visible_cases(): ...", False),
        ("def encoding_table(module: nn.Module, length: int): ...", False),
    ],
)
def test_the_verb_rule_tells_an_output_from_code(source: str, wrong: bool) -> None:
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert (verb_problem(function) is not None) == wrong


def checks_modules() -> list[Path]:
    """Every ``checks.py`` of course/ and the topic modules beside it (``*_checks.py``)."""
    return sorted(
        {*(REPO / "course").glob("*/checks.py"), *(REPO / "course").glob("*/*_checks.py")}
    )


def test_the_checks_follow_the_verbs() -> None:
    """A function of the checks that takes an output is named for it (CONTRIBUTING.md, Verbs)."""
    problems, verbs = [], 0
    for path in checks_modules():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                verbs += node.name.startswith(("diagnose_", "observe_", "judge_"))
                problem = verb_problem(node)
                if problem:
                    problems.append(f"{path.relative_to(REPO)}: {problem}")
    assert verbs > 80, verbs
    assert not problems, "\n".join(problems)


def test_one_package_per_assignment_mirrors_source_and_demo() -> None:
    for assignment in ASSIGNMENTS:
        package = REPO / "course" / assignment
        assert (package / "__init__.py").is_file(), f"course/{assignment}/ is missing"
        assert (package / "checks.py").is_file(), f"course/{assignment}/checks.py is missing"
        assert (package / "probe.py").is_file(), f"course/{assignment}/probe.py is missing"
        assert (REPO / "judge" / f"{assignment}.py").is_file(), f"judge/{assignment}.py"
        assert (REPO / "demo" / assignment).is_dir(), f"demo/{assignment}/ is missing"
    packages = {p.parent.name for p in (REPO / "course").glob("*/__init__.py")}
    assert packages - set(ASSIGNMENTS) == {"data"}, packages


def graded_names() -> set[str]:
    """Every function and class that a solution cell of an instructor's notebook defines."""
    names = set()
    for path in REPO.glob("source/*/*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("solution") and cell["cell_type"] == "code":
                tree = ast.parse("".join(cell["source"]))
                names |= {
                    n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                }
    return names


def test_graded_names_are_found() -> None:
    assert {"generate_square_subsequent_mask", "TransformerModel", "mask_tokens"} <= graded_names()


@pytest.mark.parametrize("path", sorted((REPO / "course").rglob("*.py")), ids=str)
def test_no_graded_answer_is_defined_in_the_package(path) -> None:
    tree = ast.parse(path.read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    leaked = defined & (graded_names() | FORMER_COPIES)
    assert not leaked, f"{path.relative_to(REPO)} defines {leaked}: graded answers"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_test_cell_is_declared_once(assignment: str) -> None:
    """The probe's table ``CELLS`` names every test cell's function on both sides; no other file
    of the assignment's kernel side or judge names a grade_id (the notebook aside)."""
    import importlib

    from course.probing import by_cell

    probe = importlib.import_module(f"course.{assignment}.probe")
    judged = by_cell(probe.CELLS, vars(importlib.import_module(f"judge.{assignment}")))
    assert set(judged) == set(probe.ITEMS) == set(probe.CELLS)
    for path in [*(REPO / "course" / assignment).glob("*.py"), REPO / "judge" / f"{assignment}.py"]:
        text = path.read_text()
        for cell in probe.CELLS:
            expected = 1 if path.name == "probe.py" else 0
            assert text.count(f'"{cell}"') == expected, f"{path.relative_to(REPO)} names {cell}"
