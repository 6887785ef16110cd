"""What Airflow's processes import from the provider before they use a Delta table.

Every task, the scheduler, the triggerer and the DAG processor load the ``airflow.plugins``
entry point (for macros and listeners); the hook, the sensor, the trigger, the commit and
PySpark operators and the decorator are imported when a DAG file or a trigger names them, in
every parse of that file. None of them may import pyarrow, and the plugin neither FastAPI nor
the core: only the API server reads ``DeltaViewPlugin.fastapi_apps``, which imports the app
when read. Checked in a fresh process, where nothing else imported them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_PROBE = textwrap.dedent(
    """
    import sys

    import airflow_delta_provider.plugins
    plugin_modules = set(sys.modules)
    import airflow_delta_provider.hooks.delta
    import airflow_delta_provider.sensors.delta
    import airflow_delta_provider.triggers.delta
    import airflow_delta_provider.operators.commit
    import airflow_delta_provider.operators.pyspark
    import airflow_delta_provider.decorators.pyspark
    print(" ".join(sorted(plugin_modules)))
    print(" ".join(sorted(sys.modules)))
    """
)


def test_plugin_hook_sensor_and_trigger_import_no_pyarrow() -> None:
    result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    plugin_line, modules_line = result.stdout.strip().splitlines()[-2:]
    plugin, modules = set(plugin_line.split()), set(modules_line.split())
    assert {
        "fastapi",
        "pyarrow",
        "airflow_delta_provider.core",
        "airflow_delta_provider.plugins.app",
    } & plugin == set()
    assert {
        "pyarrow",
        "airflow_delta_provider.core.table.delta_table",
        "airflow_delta_provider.core.log.snapshot",
    } & modules == set()


def test_the_api_server_still_gets_the_app() -> None:
    from fastapi import FastAPI

    from airflow_delta_provider.plugins import DeltaViewPlugin

    apps = DeltaViewPlugin().fastapi_apps
    assert [(type(a["app"]), a["url_prefix"], a["name"]) for a in apps] == [
        (FastAPI, "/delta", "Delta tables")
    ]
    assert DeltaViewPlugin.fastapi_apps[0]["app"] is apps[0]["app"]  # on the class too, one app
