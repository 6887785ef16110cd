"""Test-wide settings: an isolated Airflow home, so no test touches ~/airflow."""

from __future__ import annotations

import os
import tempfile

# Set before anything imports airflow: its configuration is read at import time.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-delta-tests-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
