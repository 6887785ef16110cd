"""Delta tables as Airflow assets (asset URI = the table's storage URI)."""

from airflow_delta_provider.assets.delta import asset_event_extra, delta_table_asset, table_asset_uri

__all__ = ["asset_event_extra", "delta_table_asset", "table_asset_uri"]
