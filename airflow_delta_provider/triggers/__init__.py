"""Triggers of the Delta Lake provider."""
