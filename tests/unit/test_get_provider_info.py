from __future__ import annotations

from importlib.metadata import entry_points

from airflow_delta_provider import __version__
from airflow_delta_provider.get_provider_info import get_provider_info


def test_entry_point_is_registered():
    points = [
        ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_delta")
    ]
    assert len(points) == 1
    assert points[0].load()()["package-name"] == "airflow-delta-provider"


def test_provider_manager_lists_the_package():
    from airflow.providers_manager import ProvidersManager

    providers = ProvidersManager().providers
    assert "airflow-delta-provider" in providers
    assert providers["airflow-delta-provider"].version == __version__


def test_provider_info_versions_match_the_package():
    assert get_provider_info()["versions"] == [__version__]
