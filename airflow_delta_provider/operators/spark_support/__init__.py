"""What the Spark operators (PySpark, OPTIMIZE) share on the Spark side of a task: the directory
an attempt writes into and the files of it that are deleted when its commit did not land
(:mod:`.attempt`), the table's constraints checked on Spark (:mod:`.constraints`), Spark's own
output routed into the task log (:mod:`.output`), and the source a consumer reads
(:mod:`.source`). Not the Spark adapter (``airflow_delta_provider.spark``), which reads tables
for any Python process.
"""
