"""Operators: idempotent commits of PySpark output and Delta table maintenance."""
