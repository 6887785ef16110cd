"""DELETE benchmark: the core against delta-rs ``delete()`` on the same tables, in the same run.

Two questions (issue 26):

1. **A partition delete** (``part = 7``) on the log-only tables of ``generate.py`` (1,000 to
   1,000,000 active files, 100 partitions; there are no data files at all, so a delete that read
   one would fail): metadata only, the cost is the file list's, never the data's.
2. **A row-level delete** on real data (``rows``: 16 files of 250,000 rows; ``v`` uniform, so
   ``v < 1000`` selects 0.1 % of the rows of every file; ``id`` ascending, so an ``id`` range
   selects rows of one file): the core with deletion vectors (``core dv``) and copy-on-write
   (``core cow``) against delta-rs, which always rewrites.

Every run works on a fresh copy of the table (made before the timer), in a fresh Python process
(imports excluded from the timing and shown apart: the core's include ``pyarrow.dataset``, which
imports pandas; the timer covers opening the table, which loads delta-rs's state, and the DELETE);
the contenders run in turn, A B A B, and the ratio to delta-rs is taken run by run (the machine's
speed drifts under load). Post-commit checkpoints are off for
both. Each run is checked: the files removed, the rows left (read by the core).

Usage: ``python benchmarks/bench_delete.py [--repeat 5] [--tables a-1k,a] [--write]``
(``generate.py --tables a-1k,a-10k,a-100k,a`` first; ``--write`` updates ``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ROWS = DATA / "delete-rows"
README = HERE / "README.md"
FILES, ROWS_PER_FILE = 16, 250_000

_PRELUDE = """
import json, sys, time
uri, predicate = sys.argv[1], sys.argv[2]
"""

RUNS = {
    "core": """
begin = time.perf_counter()
from airflow_delta_provider.core import DeltaTable
import pyarrow.dataset  # what a DELETE reads (or evaluates a predicate) with; it imports pandas
imports = time.perf_counter() - begin
start = time.perf_counter()
result = DeltaTable(uri).delete(predicate, auto_checkpoint=False)
elapsed = time.perf_counter() - start
out = {"removed": result.num_removed_files, "dvs": result.num_deletion_vectors_added,
       "deleted": result.num_deleted_rows, "mode": result.mode}
""",
    "delta-rs": """
begin = time.perf_counter()
import deltalake
imports = time.perf_counter() - begin
start = time.perf_counter()
hooks = deltalake.PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
metrics = deltalake.DeltaTable(uri).delete(predicate, post_commithook_properties=hooks)
elapsed = time.perf_counter() - start
out = {"removed": metrics["num_removed_files"], "dvs": 0, "deleted": metrics.get("num_deleted_rows"),
       "mode": "copy_on_write" if metrics["num_added_files"] else "whole files"}
""",
}

_EPILOGUE = """
print(json.dumps({"seconds": elapsed, "imports": imports, **out}))
"""


def generate_rows() -> None:
    """The row-level table: two copies of the same files, one enabling deletion vectors."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if (ROWS / ".complete").exists():
        return
    shutil.rmtree(ROWS, ignore_errors=True)
    rng = np.random.default_rng(26)
    data = ROWS / "files"
    data.mkdir(parents=True)
    for n in range(FILES):
        ids = np.arange(n * ROWS_PER_FILE, (n + 1) * ROWS_PER_FILE, dtype=np.int64)
        values = rng.integers(0, 1_000_000, ROWS_PER_FILE)
        names = pa.array([f"name-{i % 5000}" for i in range(ROWS_PER_FILE)])
        pq.write_table(pa.table({"id": ids, "v": values, "name": names}), data / f"part-{n:05d}.parquet")
    from airflow_delta_provider.core import DeltaTable

    schema = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("name", pa.string())])
    for name, properties in (("plain", {}), ("dv", {"delta.enableDeletionVectors": "true"})):
        root = ROWS / name
        table = DeltaTable.create(str(root), schema, properties=properties)
        for path in sorted(data.iterdir()):
            os.link(path, root / path.name)
        table.commit_files(sorted(p.name for p in data.iterdir()))
    (ROWS / ".complete").write_text("ok")


#: The row-level deletes: (label, predicate).
SCENARIOS = [
    ("rows: v < 1000 (0.1 % of every file)", "v < 1000"),
    ("rows: id range in one file", "id >= 1000000 AND id < 1000100"),
]


def _copy(source: Path, target: Path) -> None:
    # Data files are hard-linked (never modified in place: a delete writes new files); the log is copied.
    subprocess.run(["cp", "-al", str(source), str(target)], check=True)
    log = target / "_delta_log"
    shutil.rmtree(log)
    shutil.copytree(source / "_delta_log", log)
    (target / ".complete").unlink(missing_ok=True)


def _run(contender: str, root: Path, predicate: str) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", _PRELUDE + RUNS[contender] + _EPILOGUE, str(root), predicate],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def _rows_left(root: Path) -> int:
    from airflow_delta_provider.core import DeltaTable

    return DeltaTable(str(root)).snapshot().to_pyarrow_table(["id"]).num_rows


def measure(pairs: list[tuple[str, str, Path]], predicate: str, repeat: int, check_rows: bool) -> dict:
    """Seconds per contender and the paired ratios to delta-rs, ``pairs`` = (name, contender, table)."""
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in pairs}
    imports: dict[str, list[float]] = {name: [] for name, _, _ in pairs}
    ratios: dict[str, list[float]] = {name: [] for name, _, _ in pairs}
    outcome: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-delete-", dir=DATA) as tmp:
        for index in range(repeat):
            this: dict[str, float] = {}
            for name, contender, source in pairs:
                root = Path(tmp) / f"{index}-{name.replace(' ', '-')}"
                _copy(source, root)
                run = _run(contender, root, predicate)
                this[name] = run["seconds"]
                seconds[name].append(run["seconds"])
                imports[name].append(run["imports"])
                if check_rows:
                    run["rows_left"] = _rows_left(root)
                outcome.setdefault(name, run)
                if outcome[name].get("rows_left") != run.get("rows_left"):
                    raise SystemExit(f"{name}: {run} differs from its first run {outcome[name]}")
                shutil.rmtree(root)
            for name in this:
                ratios[name].append(this[name] / this["delta-rs"])
    rows = {r.get("rows_left") for r in outcome.values()}
    if len(rows) != 1:
        raise SystemExit(f"the contenders leave different rows: {outcome}")
    return {
        name: {
            "min": min(seconds[name]),
            "median": statistics.median(seconds[name]),
            "ratio": statistics.median(ratios[name]),
            "imports": statistics.median(imports[name]),
            **outcome[name],
        }
        for name in seconds
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tables", default="a-1k,a-10k,a-100k,a")
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--no-rows",
        dest="rows",
        action="store_false",
        help="only the partition deletes, not the row-level ones",
    )
    args = parser.parse_args()
    load = os.getloadavg()
    lines = [
        f"Machine: {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, Python "
        f"{platform.python_version()}; median of {args.repeat} fresh processes per contender, each on "
        f"a fresh copy; load average {load[0]:.1f} at the start.",
        "",
        "| table | predicate | contender | how | files removed | deletion vectors | median s (min) | "
        "vs delta-rs | imports s |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    partition_results: dict[str, dict] = {}
    for table in [t for t in args.tables.split(",") if t]:
        source = DATA / table
        if not (source / ".complete").exists():
            raise SystemExit(f"{source} is missing: run benchmarks/generate.py --tables {table}")
        pairs = [("core", "core", source), ("delta-rs", "delta-rs", source)]
        # The p tables (issue 32): a partition of exactly 100 files at every size.
        predicate = "part = 100" if table.startswith("p-") else "part = 7"
        partition_results[table] = measure(pairs, predicate, args.repeat, check_rows=False)
        lines += _rows(table, predicate, partition_results[table])
        print("\n".join(lines[-2:]), flush=True)
    lines += _growth(partition_results)
    if args.rows:
        lines += _row_level(args.repeat)
    lines.append("")
    lines.append(f"Load average at the end: {os.getloadavg()[0]:.1f}.")
    text = "\n".join(lines)
    print(text)
    if args.write:
        _write(text)


def _growth(results: dict[str, dict]) -> list[str]:
    """Per layout of the p tables, the DELETE's time at 1M files over its time at 10k (medians)."""
    lines = []
    for small in [t for t in results if t.startswith("p-") and t.endswith("-10k")]:
        large = small[: -len("10k")] + "1m"
        if large not in results:
            continue
        cells = [
            f"{name} {results[large][name]['median'] / results[small][name]['median']:.2f}x"
            for name in results[small]
        ]
        lines.append(
            f"| {small[:-4]}: 1M / 10k files, growth of the median | | " + ", ".join(cells) + " | | | | | | |"
        )
    return lines


def _row_level(repeat: int) -> list[str]:
    lines: list[str] = []
    generate_rows()
    for label, predicate in SCENARIOS:
        pairs = [
            ("core dv", "core", ROWS / "dv"),
            ("core cow", "core", ROWS / "plain"),
            ("delta-rs", "delta-rs", ROWS / "plain"),
        ]
        results = measure(pairs, predicate, repeat, check_rows=True)
        lines += _rows(label.split(":")[0], predicate, results)
        print("\n".join(lines[-3:]), flush=True)
    return lines


def _rows(table: str, predicate: str, results: dict) -> list[str]:
    return [
        f"| {table} | `{predicate}` | {name} | {r['mode']} | {r['removed']} | {r['dvs']} | "
        f"{r['median']:.3f} ({r['min']:.3f}) | {r['ratio']:.2f}x | {r['imports']:.2f} |"
        for name, r in results.items()
    ]


def _write(text: str) -> None:
    readme = README.read_text()
    begin, end = "<!-- delete:start -->", "<!-- delete:end -->"
    if begin not in readme:
        raise SystemExit(f"{README} has no {begin} marker")
    head, rest = readme.split(begin, 1)
    _, tail = rest.split(end, 1)
    README.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


if __name__ == "__main__":
    main()
