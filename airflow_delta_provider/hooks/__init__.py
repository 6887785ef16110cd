"""Hooks of the Delta Lake provider."""
