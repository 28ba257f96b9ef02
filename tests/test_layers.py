"""The layers of docs/architecture.md hold: no module imports upward at module level, no private
name crosses modules, and ``import fractal_nb`` loads no widget library.

Covers: exploration/terms.py.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import fractal_nb

PACKAGE = Path(fractal_nb.__file__).parent

# docs/architecture.md, "Layers": a module may import its own layer or those below it. A layer is a
# folder; the modules at the package's root are the leaves, and the package itself is a face.
LAYERS = [
    ("leaves", []),
    ("store", ["store"]),
    ("model layer", ["llm", "prompts"]),
    ("results", ["results"]),
    ("engine", ["engine"]),
    ("facade", ["exploration"]),
    ("faces", ["views", "cli", "mcp"]),
]
RANK = {folder: rank for rank, (_, folders) in enumerate(LAYERS) for folder in folders}
FACES = len(LAYERS) - 1


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def rank(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return FACES  # the package's front: what ``import fractal_nb`` gives
    if (PACKAGE / parts[1]).is_dir():
        if parts[1] not in RANK:
            raise AssertionError(f"folder {parts[1]}/ is no layer of docs/architecture.md: add it to LAYERS")
        return RANK[parts[1]]
    return 0  # a module at the root: a leaf


def test_the_root_holds_only_leaves() -> None:
    # Each module at the root imports nothing of the package but other leaves.
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for target, _names, line in module_level_imports(path):
            assert rank(target) == 0, f"{module_name(path)}:{line} imports {target}: a root module is a leaf"


def module_level_imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names, line) for each import at module level, TYPE_CHECKING blocks aside."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:  # from . import errors: each name is a module
                found += [(f"{target}.{a.name}", [], node.lineno) for a in node.names]
            else:
                found.append((target, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names]
    return [(m, names, line) for m, names, line in found if m.split(".")[0] == "fractal_nb"]


def test_no_module_imports_upward_at_module_level() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = module_name(path)
        for target, _names, line in module_level_imports(path):
            if rank(target) > rank(here):
                upward.append(
                    f"{here}:{line} imports {target} ({LAYERS[rank(target)][0]} above "
                    f"{LAYERS[rank(here)][0]})"
                )
    assert not upward, "upward imports (import lazily, in the function that needs it):\n" + "\n".join(upward)


def test_no_private_name_is_imported_from_another_module() -> None:
    crossing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for target, names, line in module_level_imports(path):
            crossing += [
                f"{module_name(path)}:{line} imports {target}.{n}"
                for n in names
                if n.startswith("_") and not n.startswith("__")
            ]
    assert not crossing, "\n".join(crossing)


def test_only_the_store_imports_duckdb() -> None:
    # docs/architecture.md, "Layers": the store is the only code that speaks SQL.
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            outside += [f"{module_name(path)}:{node.lineno}" for n in names if n.split(".")[0] == "duckdb"]
    assert not outside, "duckdb imported outside store/: " + ", ".join(outside)


def test_importing_the_package_loads_no_widget_library() -> None:
    code = (
        "import sys, fractal_nb; "
        "print(sorted(m for m in ('ipywidgets', 'anywidget', 'pyvis', 'traitlets') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


# docs/architecture/store.md, "The store's layout": the steps are plain classes GraphStore composes.
STEP_BASES = {"object", "Protocol", "TypedDict", "StrEnum", "NamedTuple"}
# The contract (store/contract.py) and the store that implements it.
CONTRACT_BASES = {
    ("contract.py", "Store"): {"WorkerStore"},
    ("graph_store.py", "GraphStore"): {"Store"},
    ("postgres.py", "_NumberLoader"): {"Loader"},  # psycopg's adapter for numeric results, not a step
}


def test_the_stores_steps_are_plain_classes_only_graph_store_composes() -> None:
    store = PACKAGE / "store"
    found = []
    for path in sorted(store.glob("*.py")):
        if path.name in ("__init__.py", "records.py"):  # the package's export; TypedDicts extending others
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).split("[")[0].split(".")[-1] for b in node.bases} - STEP_BASES
                bases -= CONTRACT_BASES.get((path.name, node.name), set())
                found += [f"{path.name}: class {node.name} inherits {b}" for b in sorted(bases)]
            if path.name != "graph_store.py" and isinstance(node, ast.ImportFrom) and node.module:
                if node.module.endswith("graph_store"):  # a step never reaches the whole store
                    found.append(f"{path.name}:{node.lineno} imports graph_store")
    assert not found, "\n".join(found)


def names_in(node: ast.AST) -> set[str]:
    """The names an expression mentions, a quoted annotation's too."""
    found = set()
    for part in ast.walk(node):
        if isinstance(part, ast.Name):
            found.add(part.id)
        elif isinstance(part, ast.Attribute):
            found.add(part.attr)
        elif isinstance(part, ast.Constant) and isinstance(part.value, str):
            try:
                found |= names_in(ast.parse(part.value, mode="eval"))
            except SyntaxError:
                pass  # a string, not an annotation
    return found


def uses_of_the_concrete_store(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, how) where code names GraphStore as a type: an annotation, isinstance or Concatenate."""
    found = []
    for node in ast.walk(tree):
        typed: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            every += [a for a in (arguments.vararg, arguments.kwarg) if a]
            typed = [a.annotation for a in every] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            typed = [node.annotation]
        found += [(node.lineno, "annotates") for t in typed if t is not None and "GraphStore" in names_in(t)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            if len(node.args) == 2 and "GraphStore" in names_in(node.args[1]):
                found.append((node.lineno, "isinstance-checks"))
        if isinstance(node, ast.Subscript) and "Concatenate" in names_in(node.value):
            if "GraphStore" in names_in(node.slice):
                found.append((node.lineno, "Concatenates"))
    return found


def test_above_the_store_code_is_typed_by_the_contract_not_graph_store() -> None:
    # docs/architecture.md, "Layers": store/contract.py's Store and WorkerStore are the seam; a second
    # backend implements them. Constructing a GraphStore stays allowed (open_store will take it over).
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "store") in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{module_name(path)}:{line} {how} GraphStore" for line, how in uses_of_the_concrete_store(tree)
        ]
    assert not found, "use Store or WorkerStore (fractal_nb/store/contract.py):\n" + "\n".join(found)


def test_the_contract_rule_sees_each_way_of_naming_graph_store() -> None:
    code = (
        "def a(store: GraphStore) -> None: ...\n"
        "def b(store: 'Store') -> 'store.GraphStore': ...\n"
        "x: list[GraphStore] = []\n"
        "ok = isinstance(y, (int, GraphStore))\n"
        "M = Callable[Concatenate[GraphStore, P], R]\n"
        "fine = GraphStore(path)\n"
        "def c(store: Store, *rest: WorkerStore) -> None: ...\n"
    )
    found = sorted(uses_of_the_concrete_store(ast.parse(code)))
    assert found == [
        (1, "annotates"),
        (2, "annotates"),
        (3, "annotates"),
        (4, "isinstance-checks"),
        (5, "Concatenates"),
    ]


def test_every_insert_names_its_columns() -> None:
    # An INSERT by position breaks silently when a table gains a column (schema steps add them).
    positional = re.compile(
        r"INSERT\s+(?:OR\s+REPLACE\s+)?INTO\s+\w+\s+(?:VALUES|SELECT|WITH)\b", re.IGNORECASE
    )
    found = [
        f"{module_name(path)}: {m.group(0)}"
        for path in sorted((PACKAGE / "store").rglob("*.py"))
        for m in positional.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)
