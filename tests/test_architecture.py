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
    (
        "foundation",
        {
            "utils",
            "utils.lazy",
            "errors",
            "utils.redaction",
            "utils.arguments",
            "utils.arrays",
            "utils.memory",
        },
    ),
    (
        "storage",
        {
            "storage.paths",
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
            "storage.sdk_compat",
        },
    ),
    (
        "model",
        {
            "protocol.delta_types",
            "protocol.action_checks",
            "protocol.schema",
            "protocol.schema_json",
            "protocol.column_mapping",
            "protocol.partitions",
            "protocol.actions",
            "protocol.validation",
            "log.deletion_vectors",
            "log.logfiles",
            "protocol.features",
            "protocol.table_config",
            "expressions.predicate",
            "transaction.datafiles",
            "log.file_actions",
            "expressions.stats",
            "expressions.stats_encoding",
            "expressions.stats_parsed",
            "parquet",
            "protocol",
            "parquet.footer",
            "parquet.pyarrow_compat",
            "parquet.page_scan",
            "parquet.thrift",
            "parquet.page_index",
            "protocol.row_tracking",
            "protocol.sql_engine",
            "protocol.constraints",
        },
    ),
    (
        "log",
        {
            "log.segment",
            "log.commits",
            "log.reconcile",
            "log.replay",
            "log.checkpoint_reader",
            "log.checkpoint_pages",
            "log.checksum",
            "log.scan",
        },
    ),
    ("snapshot", {"log", "log.snapshot", "log.timeline", "expressions", "expressions.skipping"}),
    (
        "operations",
        {
            "transaction",
            "transaction.commit_plan",
            "transaction.conflicts",
            "transaction.commit",
            "transaction.create",
            "transaction.write",
            "transaction.idempotency",
            "maintenance",
            "maintenance.checkpoint",
            "maintenance.checkpoint.hint",
            "maintenance.checkpoint.placement",
            "maintenance.checkpoint.policy",
            "maintenance.checkpoint.writer",
            "maintenance.cleanup",
            "maintenance.vacuum",
            "maintenance.vacuum.plan",
            "maintenance.vacuum.record",
            "maintenance.vacuum.result",
            "maintenance.vacuum.retention",
            "maintenance.optimize",
            "maintenance.optimize_outputs",
            "lifecycle.purge",
            "lifecycle.restore",
            "maintenance.vacuum.distributed",
            "maintenance.vacuum.discard",
            "changes",
            "changes.feed",
            "changes.bounds",
            "changes.derive",
            "changes.rows",
            "changes.read_schema",
            "lifecycle",
            "lifecycle.delete",
            "lifecycle.delete_plan",
            "lifecycle.delete_rows",
            "lifecycle.data_retention",
        },
    ),
    ("facade", {"table.delta_table", "__init__"}),
    ("services", {"table", "table.maintenance_due", "table.watch", "table.consumer"}),
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
    assert (
        "airflow_delta_provider.core.log.snapshot" in GRAPH["airflow_delta_provider.core.table.delta_table"]
    )


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
    getattr_defined = any(
        (isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
        or (
            isinstance(n, ast.Assign)
            and "__getattr__" in {t.id for t in ast.walk(n.targets[0]) if isinstance(t, ast.Name)}
        )
        for n in tree.body
    )
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


# --- one configuration, no reach-ins, small modules -------------------------------------------

#: The modules that build a TableConfig: the class itself, and ``Metadata.config`` (a table's own
#: properties, typed). Everything else reads ``Snapshot.config``, its ``table_only`` view, or
#: ``Metadata.config``.
TABLE_CONFIG_BUILDERS = {f"{ROOT}.core.protocol.table_config", f"{ROOT}.core.protocol.actions"}


def _calls_to(tree: ast.AST, name: str) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == name)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
        )
    ]


def test_no_module_builds_a_table_config_of_its_own() -> None:
    built = {
        name: _calls_to(ast.parse(path.read_text()), "TableConfig")
        for name, path in MODULES.items()
        if name not in TABLE_CONFIG_BUILDERS
    }
    assert {name: lines for name, lines in built.items() if lines} == {}


def _schema_string_reads(tree: ast.AST) -> list[int]:
    """Lines that hand a ``schema_string`` attribute to a call (a parse of its own, not the one)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and any(isinstance(arg, ast.Attribute) and arg.attr == "schema_string" for arg in node.args)
    ]


#: ``Metadata.schema_json`` is the one parse of a ``schemaString`` (its nesting bounded, a corrupt
#: one named as such); ``actions`` is where it lives.
SCHEMA_STRING_PARSERS = {f"{ROOT}.core.protocol.actions"}


def test_a_schema_string_is_parsed_only_by_metadata_schema_json() -> None:
    parsed = {
        name: _schema_string_reads(ast.parse(path.read_text()))
        for name, path in MODULES.items()
        if name not in SCHEMA_STRING_PARSERS
    }
    assert {name: lines for name, lines in parsed.items() if lines} == {}


def _is_compat(path: Path) -> bool:
    """``*_compat.py``: where a dependency's private API may be used, each pinned by a test."""
    return path.stem.endswith("_compat")


def _defined_names(tree: ast.AST) -> set[str]:
    """Names a module defines: functions, classes, module and class variables, ``self.x`` attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_touches_a_private_attribute_it_does_not_own() -> None:
    """``obj._x`` only where this module defines ``_x`` (its own classes' state); another module's
    private state goes through a public method, a dependency's private API through a ``*_compat.py``."""
    reach_ins = []
    for name, path in MODULES.items():
        if _is_compat(path):
            continue
        tree = ast.parse(path.read_text())
        own = _defined_names(tree)
        reach_ins += [
            f"{name}:{node.lineno} .{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and _private(node.attr)
            and node.attr not in own
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ]
    assert reach_ins == []


def test_private_apis_of_dependencies_are_imported_only_in_compat_modules() -> None:
    imports = []
    for name, path in MODULES.items():
        if _is_compat(path):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] == ROOT:
                    continue
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names if a.name.split(".")[0] != ROOT]
            else:
                continue
            imports += [f"{name}:{node.lineno} {m}" for m in modules if any(map(_private, m.split(".")))]
    assert imports == []


#: Modules still over the size limit, each to be split. The list only shrinks: a module that fits
#: is taken off it.
OVERSIZED_MODULES: set[str] = set()
MAX_MODULE_LINES = 800
#: Core functions still over the size limit, each to be cut into named steps (the list only shrinks).
LONG_CORE_FUNCTIONS: set[str] = set()
MAX_FUNCTION_LINES = 100


def test_no_module_is_over_800_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {n for n, lines in sizes.items() if lines > MAX_MODULE_LINES} - OVERSIZED_MODULES == set()
    fitting = {n for n in OVERSIZED_MODULES if sizes.get(n, 0) <= MAX_MODULE_LINES}
    assert fitting == set(), "these fit now: take them off OVERSIZED_MODULES"


def test_no_core_function_is_over_100_lines() -> None:
    lengths = {}
    for name, path in MODULES.items():
        if not name.startswith(f"{ROOT}.core"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lengths[f"{normalised(name)}.{node.name}"] = node.end_lineno - node.lineno + 1
    assert {n for n, size in lengths.items() if size > MAX_FUNCTION_LINES} - LONG_CORE_FUNCTIONS == set()
    fitting = {n for n in LONG_CORE_FUNCTIONS if lengths.get(n, 0) <= MAX_FUNCTION_LINES}
    assert fitting == set(), "these fit now: take them off LONG_CORE_FUNCTIONS"


#: Module docstrings say what and why in a few lines; history, figures and rule-by-rule detail
#: belong in ``docs/`` and ``benchmarks/``. The list of modules still over the
#: limit only shrinks.
LONG_MODULE_DOCSTRINGS: set[str] = set()
MAX_MODULE_DOCSTRING_LINES = 15


def _module_docstring_lines(tree: ast.Module) -> int:
    """How many source lines the module's docstring spans (0 without one)."""
    first = tree.body[0] if tree.body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return 0
    assert first.end_lineno is not None
    return first.end_lineno - first.lineno + 1


def test_module_docstrings_are_a_few_lines() -> None:
    lengths = {name: _module_docstring_lines(ast.parse(path.read_text())) for name, path in MODULES.items()}
    assert {
        n for n, lines in lengths.items() if lines > MAX_MODULE_DOCSTRING_LINES
    } - LONG_MODULE_DOCSTRINGS == set()
    fitting = {n for n in LONG_MODULE_DOCSTRINGS if lengths.get(n, 0) <= MAX_MODULE_DOCSTRING_LINES}
    assert fitting == set(), "these fit now: take them off LONG_MODULE_DOCSTRINGS"


#: The Airflow layer's packages, bottom up: a package imports its own or lower ones (and the core).
AIRFLOW_LAYERS = [
    {"utils", "config"},
    {"hooks", "assets", "openlineage"},
    {"operators", "sensors", "triggers", "plugins"},
    {"decorators"},
]


def _airflow_layer(name: str) -> int | None:
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return next((i for i, members in enumerate(AIRFLOW_LAYERS) if top in members), None)


def test_the_airflow_layer_imports_only_down() -> None:
    upward = []
    for name, targets in GRAPH.items():
        level = _airflow_layer(name)
        if level is None:
            continue
        for target in targets:
            target_level = _airflow_layer(target)
            if target_level is not None and target_level > level:
                upward.append(f"{normalised(name)} -> {target}")
    assert upward == []


def test_the_checks_see_what_they_check() -> None:
    """Each check above finds what it forbids when it is there (the rules cannot pass vacuously)."""
    sample = ast.parse("TableConfig({})\nclient._pipeline.run()\nfrom pyarrow import _parquet\n")
    assert _calls_to(sample, "TableConfig") == [1]
    assert _schema_string_reads(ast.parse("json.loads(m.schema_string)\nm.schema_json")) == [1]
    assert [n.attr for n in ast.walk(sample) if isinstance(n, ast.Attribute) and _private(n.attr)] == [
        "_pipeline"
    ]
    assert _is_compat(PACKAGE / "core" / "parquet" / "pyarrow_compat.py")
    assert any(_private(part) for part in ["pyarrow", "_parquet"])
    assert _airflow_layer(f"{ROOT}.utils.coercion") == 0 and _airflow_layer(f"{ROOT}.hooks.delta") == 1
    long_docstring = ast.parse('"""What.\n' + "detail\n" * (MAX_MODULE_DOCSTRING_LINES - 1) + '"""\nx = 1\n')
    assert _module_docstring_lines(long_docstring) == MAX_MODULE_DOCSTRING_LINES + 1
    assert _module_docstring_lines(ast.parse("x = 1\n")) == 0
