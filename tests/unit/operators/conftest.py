"""The operator tests that run Spark share the unit tier's local SparkSession (``local_spark`` in
``tests/unit/conftest.py``)."""
