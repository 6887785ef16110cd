"""Spark SQL as the oracle of the differential tests: which rows a predicate selects, on the rows
themselves (an in-memory relation: no Parquet, no pushdown), many predicates per query.

A batch is one ``SELECT id, coalesce((p1), false) AS c1, ... FROM t`` with every case's named
parameters bound (``spark.sql(text, args=...)``); a batch Spark refuses is split in halves until
each refused predicate stands alone, so each gets its own answer or its own error.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    import pyarrow as pa

#: Spark's answers are stable under Spark 4's defaults; a refusal of the core is justified when
#: Spark's answer changes under one of these (or Spark fails the query).
SETTINGS: list[dict[str, str]] = [
    {"spark.sql.ansi.enabled": "false"},
    {"spark.sql.session.timeZone": "America/New_York"},
]
BATCH = 200


@dataclass(frozen=True)
class Answer:
    """The ids a predicate selects, or Spark's error (its first line)."""

    ids: frozenset[int] | None
    error: str | None = None


class SparkOracle:
    """The rows of one table as a temporary view, asked many predicates at once.

    :param schema: the view's Spark schema (DDL): Arrow cannot say timestamp_ntz.
    """

    def __init__(self, spark: Any, rows: pa.Table, view: str, schema: str) -> None:
        self.spark = spark
        self.view = view
        spark.createDataFrame(rows, schema=schema).createOrReplaceTempView(view)
        _quiet_query_errors(spark)

    def answers(
        self, predicates: Sequence[tuple[str, Mapping[str, Any]]], settings: Mapping[str, str] | None = None
    ) -> list[Answer]:
        """Each predicate's answer, under Spark 4's defaults changed by ``settings``."""
        with self._settings(settings or {}):
            found: list[Answer] = []
            for start in range(0, len(predicates), BATCH):
                found += self._batch(list(predicates[start : start + BATCH]))
            return found

    def _batch(self, predicates: list[tuple[str, Mapping[str, Any]]]) -> list[Answer]:
        columns = ", ".join(f"coalesce(({text}), false) AS c{n}" for n, (text, _) in enumerate(predicates))
        arguments = {k: v for _, parameters in predicates for k, v in parameters.items()}
        try:
            table = self.spark.sql(f"SELECT id, {columns} FROM {self.view}", args=arguments).toArrow()
        except Exception as err:  # Spark's errors have many classes (analysis, runtime, parse)
            if len(predicates) == 1:
                return [Answer(None, _first_line(err))]
            middle = len(predicates) // 2
            return self._batch(predicates[:middle]) + self._batch(predicates[middle:])
        ids = table.column("id").to_pylist()
        return [
            Answer(
                frozenset(i for i, keep in zip(ids, table.column(f"c{n}").to_pylist(), strict=True) if keep)
            )
            for n in range(len(predicates))
        ]

    def refuses(self, text: str, parameters: Mapping[str, Any]) -> bool:
        """Whether Spark refuses the predicate when it parses and analyses it (no job runs)."""
        try:
            self.spark.sql(f"SELECT ({text}) AS c FROM {self.view}", args=dict(parameters))
        except Exception:  # a parse or analysis error, whatever its class
            return True
        return False

    def cast_fails(self, probes: Sequence[tuple[str, Any, str]]) -> list[bool]:
        """Per ``(literal text, bound value or None, type)``: whether Spark's ANSI cast of the
        literal to the type fails (``try_cast`` gives NULL for a value that is not NULL)."""
        found: list[bool] = []
        for start in range(0, len(probes), BATCH):
            batch = probes[start : start + BATCH]
            arguments = {f"probe{n}": value for n, (_, value, _) in enumerate(batch) if value is not None}
            columns = ", ".join(
                f"try_cast({text if value is None else f':probe{n}'} AS {target}) IS NULL AS c{n}"
                for n, (text, value, target) in enumerate(batch)
            )
            row = self.spark.sql(f"SELECT {columns}", args=arguments).toArrow().to_pylist()[0]
            found += [bool(row[f"c{n}"]) for n in range(len(batch))]
        return found

    @contextmanager
    def _settings(self, settings: Mapping[str, str]) -> Iterator[None]:
        saved = {key: self.spark.conf.get(key, None) for key in settings}
        for key, value in settings.items():
            self.spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, value)


def _quiet_query_errors(spark: Any) -> None:
    """Spark logs every failed query at ERROR with its stack; the oracle expects many to fail."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel("SQLQueryContextLogger", log4j.Level.OFF)


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__
