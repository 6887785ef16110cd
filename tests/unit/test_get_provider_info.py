from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

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


def test_every_listed_module_and_class_imports():
    import importlib

    info = get_provider_info()
    for kind in ("operators", "sensors", "triggers", "hooks"):
        for entry in info[kind]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for path in [d["class-name"] for d in info["task-decorators"]] + [
        c["hook-class-name"] for c in info["connection-types"]
    ]:
        module, _, name = path.rpartition(".")
        assert getattr(importlib.import_module(module), name)


def test_provider_manager_sees_hook_trigger_decorator_and_config():
    from airflow.configuration import conf
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    # Newer Airflow reads providers' configuration on first use; 3.1 only once the CLI loads it.
    if not conf.has_option("delta", "poll_interval"):
        manager.initialize_providers_configuration()
        conf.load_providers_configuration()
    try:  # Airflow 3.3+: what tasks use (hooks, decorators) is listed by the task SDK's manager
        from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

        runtime: Any = ProvidersManagerTaskRuntime()
    except ImportError:
        runtime = manager
    assert runtime.hooks["delta"].hook_class_name == "airflow_delta_provider.hooks.delta.DeltaTableHook"
    assert "airflow_delta_provider.triggers.delta" in {t.trigger_class_name for t in manager.trigger}
    assert "delta_pyspark" in runtime.taskflow_decorators
    assert conf.get("delta", "set_transaction_retention_duration") == "interval 90 days"
    assert conf.getfloat("delta", "poll_interval") == 60.0
