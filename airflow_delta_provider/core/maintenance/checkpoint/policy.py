"""Delta's automatic checkpoint policy: every ``delta.checkpointInterval`` versions."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_delta_provider.core.protocol.table_config import TableConfig

__all__ = ["should_checkpoint"]


def should_checkpoint(version: int, config: TableConfig) -> bool:
    """Whether Delta's automatic policy checkpoints after committing ``version``.

    Spark (``TransactionHelper``): ``version != 0 and version % delta.checkpointInterval == 0``.
    (delta-rs checkpoints when ``(version + 1) % interval == 0`` with a default of 100; the
    core follows Delta.)

    :param version: the version just committed.
    :param config: the table's configuration at that version (with the provider defaults).
    :raises InvalidTablePropertyError: ``delta.checkpointInterval`` is not a positive integer.
    :raises ValueError: ``version`` is not a non-negative integer.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"version must be a non-negative integer, got {version!r}.")
    return version != 0 and version % config.checkpoint_interval.value == 0
