"""Protocol checks, as the operations asked them before the feature registry.

Every decision lives in :mod:`airflow_delta_provider.core.features`; these names forward to
it while the callers move over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.features import (
    FEATURES,
    MAX_READER_VERSION,
    MAX_WRITER_VERSION,
    Operation,
    Support,
    check_supported,
    reader_features,
    validate_protocol,
    writer_features,
)

if TYPE_CHECKING:
    from airflow_delta_provider.core.actions import Metadata, Protocol

__all__ = [
    "MAX_READER_VERSION",
    "MAX_WRITER_VERSION",
    "SUPPORTED_READER_FEATURES",
    "SUPPORTED_WRITER_FEATURES",
    "Operation",
    "check_readable",
    "check_writable",
    "reader_features",
    "validate_protocol",
    "writer_features",
]

SUPPORTED_READER_FEATURES = frozenset(
    f.name for f in FEATURES.values() if f.reader and f.support[Operation.READ] is Support.YES
)
SUPPORTED_WRITER_FEATURES = frozenset(
    f.name for f in FEATURES.values() if f.support[Operation.WRITE] is Support.YES
)


def check_readable(protocol: Protocol) -> None:
    """:func:`~airflow_delta_provider.core.features.check_supported` for a read."""
    check_supported(protocol, None, Operation.READ)


def check_writable(protocol: Protocol, metadata: Metadata, operation: Operation = Operation.WRITE) -> None:
    """:func:`~airflow_delta_provider.core.features.check_supported` for ``operation``."""
    check_supported(protocol, metadata, operation)
