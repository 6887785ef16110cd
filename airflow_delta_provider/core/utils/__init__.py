"""The core's small shared tools, below everything else: what a secret is and how it is hidden
(:mod:`.redaction`), type checks of public arguments, Arrow arrays from Python values without
pyarrow's pandas probe, the Arrow memory pool every read allocates from, and the lazy faces of
the subpackages. Nothing here knows what a Delta table is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.utils.redaction import (
        get_logger,
        location_secrets,
        masked_options,
        redact,
        register_secret,
        secret_parts,
        sensitive_options,
        split_credentials,
    )

_LAZY = {
    "get_logger": "airflow_delta_provider.core.utils.redaction",
    "location_secrets": "airflow_delta_provider.core.utils.redaction",
    "masked_options": "airflow_delta_provider.core.utils.redaction",
    "redact": "airflow_delta_provider.core.utils.redaction",
    "register_secret": "airflow_delta_provider.core.utils.redaction",
    "secret_parts": "airflow_delta_provider.core.utils.redaction",
    "sensitive_options": "airflow_delta_provider.core.utils.redaction",
    "split_credentials": "airflow_delta_provider.core.utils.redaction",
}

__all__ = [
    "get_logger",
    "location_secrets",
    "masked_options",
    "redact",
    "register_secret",
    "secret_parts",
    "sensitive_options",
    "split_credentials",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
