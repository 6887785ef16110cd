"""Every table in the shared conformance corpus meets its MANIFEST.json expectation.

The corpus (``corpus/``, a copy of ``../shared/conformance``) holds real tables
written by Spark+Delta, delta-rs and delta-kernel-rs; the oracle files give the exact
active files. No table is skipped: a missing corpus fails the suite.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from airflow_delta_provider.core import DeltaError, DeltaTable, UnsupportedFeatureError

# A copy of ../shared/conformance travels with the repository so that CI on a fresh
# machine runs it; DELTA_CONFORMANCE_DIR points the suite at another copy.
CORPUS = Path(os.environ.get("DELTA_CONFORMANCE_DIR", Path(__file__).resolve().parent / "corpus"))

# Where the manifest's oracle (delta-rs) differs from Delta (Spark) without saying so, the
# core follows Delta, as the project's rule is. Each override names its reason.
DELTA_OVERRIDES: dict[str, dict[str, Any]] = {
    "app-txn-with-last-updated": {
        "app_transactions": {"new_app_0": None, "new_app_1": None, "new_app_2": None, "old_app": None},
        "why": (
            "With delta.setTransactionRetentionDuration set, Delta drops txns that have no lastUpdated "
            "(InMemoryLogReplay.getTransactions: txn.lastUpdated.exists(_ > minRetentionTimestamp)); "
            "delta-rs keeps new_app_0."
        ),
    },
}


# expected/ rows written under a non-UTC Spark session time zone: the manifest asks to read
# zone-less partition timestamps as UTC (as delta-rs does) and compare that column accordingly.
EXPECTED_ROW_SHIFTS: dict[str, tuple[str, dt.timedelta]] = {
    "data-reader-partition-values": ("as_timestamp", dt.timedelta(hours=-7)),  # America/Los_Angeles, PDT
}


def _manifest() -> list[dict[str, Any]]:
    path = CORPUS / "MANIFEST.json"
    if not path.exists():
        pytest.fail(f"The conformance corpus is missing: {path} (set DELTA_CONFORMANCE_DIR).")
    return json.loads(path.read_text())


MANIFEST = _manifest()


def test_manifest_is_complete():
    assert len(MANIFEST) == 77
    assert len({t["name"] for t in MANIFEST}) == 77


@pytest.mark.parametrize("entry", MANIFEST, ids=[t["name"] for t in MANIFEST])
def test_table(entry: dict[str, Any]) -> None:
    expect = {**entry["expect"], **DELTA_OVERRIDES.get(entry["name"], {})}
    root = CORPUS / "tables" / entry["table_root"]
    kind = expect["kind"]
    if kind == "read":
        _check_read(entry, expect, root)
    elif kind == "error":
        with pytest.raises(DeltaError) as info:
            DeltaTable(str(root)).snapshot().files()
        assert not isinstance(info.value, UnsupportedFeatureError) or entry["name"] == "simple_table_features"
        assert str(info.value)
    elif kind == "refuse":
        with pytest.raises(UnsupportedFeatureError) as info:
            DeltaTable(str(root)).snapshot().files()
        assert info.value.feature == expect["feature"]
        assert expect["feature"] in str(info.value)
    elif kind == "read-or-refuse":
        try:
            snapshot = DeltaTable(str(root)).snapshot()
            _ = snapshot.schema
        except UnsupportedFeatureError as err:
            assert expect["feature"] in (err.feature, str(err)) or expect["feature"] in str(err)
            return
        oracle = _oracle_expect(entry)
        if oracle:
            _check_read(entry, {**expect, **oracle}, root)
        else:  # read, and no oracle: the latest version, every row its add's stats count
            _check_read_without_oracle(root)
    elif kind == "unspecified":
        try:
            snapshot = DeltaTable(str(root)).snapshot()
        except DeltaError as err:
            assert str(err)
            return
        files = snapshot.files()
        versions = [int(p.name[:20]) for p in (root / "_delta_log").iterdir() if p.name[:20].isdigit()]
        assert snapshot.version == max(versions)
        assert files.num_rows > 0
    else:
        pytest.fail(f"Unknown expectation kind {kind!r}")


def _check_read_without_oracle(root: Path) -> None:
    """A table the manifest has no oracle for: the latest version, rows as the adds' stats count.

    (Values are checked per feature elsewhere, e.g. type widening in tests/unit/core.)
    """
    snapshot = DeltaTable(str(root)).snapshot()
    versions = [int(p.name[:20]) for p in (root / "_delta_log").iterdir() if p.name[:20].isdigit()]
    assert snapshot.version == max(versions)
    stats = [json.loads(s) for s in snapshot.files().column("stats").to_pylist()]
    assert snapshot.to_pyarrow_table().num_rows == sum(s["numRecords"] for s in stats)


def _oracle_expect(entry: dict[str, Any]) -> dict[str, Any]:
    oracle_name = entry["expect"].get("files")
    if not oracle_name:
        return {}
    oracle = json.loads((CORPUS / oracle_name).read_text())
    return {
        "version": oracle["version"],
        "num_active_files": len(oracle["active_files"]),
        "files": oracle_name,
        "num_rows": oracle.get("num_rows"),
    }


def _check_read(entry: dict[str, Any], expect: dict[str, Any], root: Path) -> None:
    snapshot = DeltaTable(str(root)).snapshot()
    assert snapshot.version == expect["version"]
    files = snapshot.files()
    assert files.num_rows == expect["num_active_files"]

    oracle = json.loads((CORPUS / expect["files"]).read_text())
    expected_files = (
        oracle["active_files"] if expect["num_active_files"] == len(oracle["active_files"]) else []
    )
    assert len(expected_files) == expect["num_active_files"], "the oracle disagrees with expect; see `why`"
    typed = snapshot.partition_values().to_pylist() if snapshot.partition_columns else [{}] * files.num_rows
    got = {
        row["path"]: {**row, "partition": partition}
        for row, partition in zip(
            files.select(["path", "size", "modification_time"]).to_pylist(), typed, strict=True
        )
    }
    assert sorted(got) == sorted(f["path"] for f in expected_files)
    for expected in expected_files:
        row = got[expected["path"]]
        assert row["size"] == expected["size_bytes"]
        assert row["modification_time"] == expected["modification_time"]
        if expected.get("partition") is not None:
            assert set(row["partition"]) == set(expected["partition"])
            for column, value in expected["partition"].items():
                assert _same_partition_value(row["partition"][column], value), (
                    column,
                    row["partition"][column],
                    value,
                )
    _check_deletion_vectors(snapshot, files, oracle)

    if expect.get("app_transactions") is not None:
        for app_id, version in expect["app_transactions"].items():
            assert snapshot.app_transaction_version(app_id) == version, app_id

    if expect.get("num_rows") is not None:
        table = snapshot.to_pyarrow_table()
        assert table.num_rows == expect["num_rows"]
        if entry.get("expected_results"):
            _check_rows(
                table, CORPUS / "tables" / entry["expected_results"], EXPECTED_ROW_SHIFTS.get(entry["name"])
            )
        has_dvs = files.column("deletion_vector").null_count < files.num_rows
        mapped = snapshot.properties.get("delta.columnMapping.mode", "none") != "none"
        if not has_dvs and not mapped:
            # A plain pyarrow dataset built from the snapshot gives the same count.
            assert snapshot.to_pyarrow_dataset().count_rows() == expect["num_rows"]


def _same_partition_value(ours: Any, oracle: Any) -> bool:
    """Compare a typed partition value with the oracle's JSON form of it."""
    if ours is None or oracle is None:
        return ours is None and oracle is None
    if isinstance(ours, dt.datetime):
        theirs = dt.datetime.fromisoformat(str(oracle).replace("Z", "+00:00"))
        if theirs.tzinfo is None:  # the oracle writes zone-less timestamps in UTC
            theirs = theirs.replace(tzinfo=dt.UTC)
        if ours.tzinfo is None:
            ours = ours.replace(tzinfo=dt.UTC)
        return ours == theirs
    if isinstance(ours, dt.date):
        return ours.isoformat() == str(oracle)
    if isinstance(ours, decimal.Decimal):
        return ours == decimal.Decimal(str(oracle))
    if isinstance(ours, bytes):
        return ours in (oracle.encode() if isinstance(oracle, str) else bytes(oracle),)
    return ours == oracle


def _check_deletion_vectors(snapshot: Any, files: pa.Table, oracle: dict[str, Any]) -> None:
    """Each file's deletion vector decodes to exactly the oracle's deleted row indexes."""
    from airflow_delta_provider.core.log.deletion_vectors import read_deletion_vector

    expected = oracle.get("deletion_vectors") or {}
    descriptors = {
        r["path"]: r["deletion_vector"] for r in files.select(["path", "deletion_vector"]).to_pylist()
    }
    assert {p for p, dv in descriptors.items() if dv is not None} == set(expected)
    storage = snapshot.storage
    for path, info in expected.items():
        rows = read_deletion_vector(descriptors[path], storage.root, storage.read_range)
        assert rows.tolist() == info["deleted_row_indexes"], path
        assert descriptors[path]["cardinality"] == info["num_deleted"]


def _check_rows(table: pa.Table, expected_dir: Path, shift: tuple[str, dt.timedelta] | None) -> None:
    expected = ds.dataset(str(expected_dir), format="parquet", exclude_invalid_files=True).to_table()
    assert sorted(table.column_names) == sorted(expected.column_names)
    actual_rows = sorted(_normalise(r) for r in table.select(expected.column_names).to_pylist())
    rows = expected.to_pylist()
    if shift is not None:
        column, delta = shift
        rows = [{**r, column: r[column] + delta if r[column] is not None else None} for r in rows]
    expected_rows = sorted(_normalise(r) for r in rows)
    assert actual_rows == expected_rows


def _normalise(value: Any) -> Any:
    """A sortable, comparable form: timestamps as UTC microseconds, decimals exact."""
    if isinstance(value, dict):
        return repr(sorted((k, _normalise(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return repr([_normalise(v) for v in value])
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return repr(("ts", value.isoformat()))
    if isinstance(value, decimal.Decimal):
        return repr(("dec", value.normalize()))
    return repr(value)
