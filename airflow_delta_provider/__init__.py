"""Apache Airflow provider for Delta Lake tables."""

from __future__ import annotations

__version__ = "0.1.0"
