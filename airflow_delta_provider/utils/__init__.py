"""Shared by the Airflow layer: argument coercion, secrets at the boundary, the table mixin."""
