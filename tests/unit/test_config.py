"""The ``[delta]`` section: its option names come from the core's one declaration of each table
property, and the tables the provider creates get a bounded txn retention from one place."""

from __future__ import annotations

import pytest

from airflow_delta_provider.config import (
    DEFAULT_SET_TRANSACTION_RETENTION,
    provider_table_properties,
    retention_defaults,
)
from airflow_delta_provider.core.protocol.table_config import (
    PROPERTIES,
    PROVIDER_OPTIONS,
    SET_TRANSACTION_RETENTION,
)
from airflow_delta_provider.get_provider_info import get_provider_info


def test_every_provider_option_of_a_table_property_is_declared_to_airflow():
    declared = get_provider_info()["config"]["delta"]["options"]
    assert set(PROVIDER_OPTIONS.values()) <= set(declared)
    assert {name: spec.option for name, spec in PROPERTIES.items() if spec.option} == PROVIDER_OPTIONS
    assert declared["set_transaction_retention_duration"]["default"] == DEFAULT_SET_TRANSACTION_RETENTION


def test_retention_defaults_reads_each_option_under_its_property(monkeypatch):
    assert retention_defaults() == {SET_TRANSACTION_RETENTION: DEFAULT_SET_TRANSACTION_RETENTION}
    for option in PROVIDER_OPTIONS.values():
        monkeypatch.setenv(f"AIRFLOW__DELTA__{option.upper()}", f"value of {option}")
    assert retention_defaults() == {prop: f"value of {option}" for prop, option in PROVIDER_OPTIONS.items()}


@pytest.mark.parametrize(
    ("properties", "configured", "expected"),
    [
        (None, None, DEFAULT_SET_TRANSACTION_RETENTION),
        ({"delta.appendOnly": True}, "interval 30 days", "interval 30 days"),
        ({SET_TRANSACTION_RETENTION: "interval 1 days"}, "interval 30 days", "interval 1 days"),
    ],
)
def test_a_created_table_gets_a_bounded_txn_retention_unless_it_sets_one(
    monkeypatch, properties, configured, expected
):
    if configured is not None:
        monkeypatch.setenv("AIRFLOW__DELTA__SET_TRANSACTION_RETENTION_DURATION", configured)
    result = provider_table_properties(properties)
    assert result[SET_TRANSACTION_RETENTION] == expected
    assert all(isinstance(v, str) for v in result.values())
    if properties and "delta.appendOnly" in properties:
        assert result["delta.appendOnly"] == "true"  # Delta's spelling of a boolean property
