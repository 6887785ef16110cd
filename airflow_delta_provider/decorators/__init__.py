"""Task decorators: ``@task.delta_pyspark``."""
