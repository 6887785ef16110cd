"""The Delta view: an Airflow 3 plugin with an API mounted in the API server and a page in the UI.

Registered through the ``airflow.plugins`` entry point, which Airflow always loads. It is not
also listed under ``plugins`` in ``get_provider_info``: Airflow reads that list only with
``[core] lazy_discover_providers = False`` and then records the second registration of the same
plugin as an import error. See docs/ui.md.
"""

from __future__ import annotations

from airflow_delta_provider.plugins.plugin import DeltaViewPlugin

__all__ = ["DeltaViewPlugin"]
