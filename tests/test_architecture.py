"""The layer picture of docs/architecture.md, kept true: every import of the package, read
from the source (module level, ``TYPE_CHECKING`` blocks and function bodies alike)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "airflow_delta_provider"
ROOT = "airflow_delta_provider"

#: The core's layers, bottom up (docs/architecture.md). A module may import its own layer or
#: lower ones, never a higher one.
CORE_LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"errors", "redaction", "arguments", "arrays", "memory"}),
    (
        "storage",
        {
            "paths",
            "storage",
            "storage.base",
            "storage.local",
            "storage.s3",
            "storage.memory",
            "storage.generic",
            "storage.cloud",
            "storage.deletes",
            "storage.progress",
            "storage.azure",
            "storage.gcs",
            "storage.options",
        },
    ),
    (
        "model",
        {
            "delta_types",
            "action_checks",
            "schema",
            "column_mapping",
            "partitions",
            "actions",
            "validation",
            "deletion_vectors",
            "logfiles",
            "features",
            "table_config",
            "predicate",
            "datafiles",
            "stats",
            "page_scan",
            "row_tracking",
            "sql_engine",
            "constraints",
        },
    ),
    ("log", {"segment", "commits", "replay", "checkpoint_pages", "checksum", "scan"}),
    ("snapshot", {"snapshot", "history", "skipping"}),
    (
        "operations",
        {
            "transaction",
            "create",
            "write",
            "idempotency",
            "checkpoint",
            "checkpoint.hint",
            "checkpoint.placement",
            "checkpoint.policy",
            "checkpoint.writer",
            "cleanup",
            "vacuum",
            "vacuum.plan",
            "vacuum.record",
            "vacuum.result",
            "vacuum.retention",
            "optimize",
            "optimize_outputs",
            "vacuum.distributed",
            "changes",
            "changes_bounds",
            "changes_derive",
            "changes_read",
            "changes_schema",
            "vacuum.discard",
        },
    ),
    ("facade", {"table", "__init__"}),
    ("services", {"maintenance", "watch"}),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every package module ``path`` imports, wherever the import statement is."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {
    name: {
        m.removesuffix(".__init__") for m in imports_of(path) if m in MODULES or f"{m}.__init__" in MODULES
    }
    - {name.removesuffix(".__init__")}
    for name, path in MODULES.items()
}


def normalised(name: str) -> str:
    return name.removesuffix(".__init__")


def test_the_graph_sees_the_imports() -> None:
    assert "airflow_delta_provider.core.snapshot" in GRAPH["airflow_delta_provider.core.table"]


def test_the_core_imports_neither_airflow_nor_pyspark() -> None:
    offenders = {
        name: sorted(m for m in imports_of(path) if m.split(".")[0] in ("airflow", "pyspark"))
        for name, path in MODULES.items()
        if name.startswith(f"{ROOT}.core")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_spark_adapter_imports_pyspark_never_airflow() -> None:
    """``airflow_delta_provider.spark`` reads tables with PySpark for any Python process: it imports no
    Airflow and nothing of the Airflow layer (the core is below it); the core never imports it
    (checked above: the core imports nothing outside ``core``)."""
    adapter = {name: path for name, path in MODULES.items() if name.startswith(f"{ROOT}.spark")}
    assert adapter, "the Spark adapter package is missing"
    offenders = {
        name: sorted(
            m
            for m in imports_of(path)
            if m.split(".")[0] == "airflow"
            or (m.startswith(f"{ROOT}.") and not m.startswith((f"{ROOT}.core", f"{ROOT}.spark")))
        )
        for name, path in adapter.items()
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert any(m.split(".")[0] == "pyspark" for path in adapter.values() for m in imports_of(path))


def test_there_is_no_import_cycle() -> None:
    graph = {normalised(k): {normalised(m) for m in v} for k, v in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def core_layer(name: str) -> int:
    short = normalised(name).removeprefix(f"{ROOT}.core").lstrip(".") or "__init__"
    for index, (_, members) in enumerate(CORE_LAYERS):
        if short in members:
            return index
    raise AssertionError(f"{name} is in no layer of the core: add it to CORE_LAYERS and docs/architecture.md")


def test_every_core_module_has_a_layer_and_imports_only_down() -> None:
    upward = []
    for name, targets in GRAPH.items():
        if not name.startswith(f"{ROOT}.core"):
            continue
        for target in targets:
            if target.startswith(f"{ROOT}.core") and core_layer(target) > core_layer(name):
                upward.append(f"{normalised(name)} -> {target}")
    assert upward == []


def test_the_core_imports_nothing_of_the_airflow_layer() -> None:
    upward = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if name.startswith(f"{ROOT}.core")
        for target in targets
        if not target.startswith(f"{ROOT}.core") and target != ROOT
    ]
    assert upward == []


def lazy_names(path: Path) -> dict[str, str] | None:
    """A package ``__init__``'s PEP 562 table (``_LAZY``: public name -> module), or None."""
    tree = ast.parse(path.read_text())
    getattr_defined = any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)
    table = next(
        (
            node.value
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id == "_LAZY"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        ),
        None,
    )
    if not getattr_defined:
        return None
    assert isinstance(table, ast.Dict), (
        f"{path}: a module __getattr__ resolves names only through a _LAZY dict"
    )
    return {ast.literal_eval(k): ast.literal_eval(v) for k, v in zip(table.keys, table.values, strict=True)}  # type: ignore[arg-type]


def test_lazy_names_are_edges_of_the_graph() -> None:
    """A module-level ``__getattr__`` (PEP 562) imports by name at run time, which the graph cannot
    read; so it is allowed only in a package ``__init__``, through a ``_LAZY`` table whose every
    module the same file also imports under ``TYPE_CHECKING`` (the graph's edge, checked above for
    layers and cycles like any other import)."""
    seen = 0
    for name, path in MODULES.items():
        table = lazy_names(path)
        if table is None:
            continue
        assert path.name == "__init__.py", f"{name}: a module __getattr__ only in a package __init__"
        seen += 1
        imported = imports_of(path)
        for public, module in table.items():
            assert f"{module}.{public}" in imported, f"{name}: _LAZY[{public!r}] = {module!r} is not imported"
    assert seen >= 1  # the core's __init__
