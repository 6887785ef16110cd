"""Sensors of the Delta Lake provider."""
