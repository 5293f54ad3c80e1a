"""The data pipeline on Spark: route a message dataset against a topology and account for every
message (docs/pipeline.md).

- `spark`: `start_spark`, one way to start Spark for the job and the tests;
- `io`: reading a dataset and the checks made before routing;
- `transform`: the pure routing step, Arrow batches in and out;
- `worker`: what each Spark task runs, writing its parts and a manifest;
- `summary`: counts, per-queue and per-binding figures, as JSON, plot and tables;
- `progress`: the progress bar, from Spark's status tracker;
- `engine`: the topic engine a pipeline uses by default;
- `job`: `run_pipeline`, the thin main that wires them and proves the invariant;
- `sample`: the realistic sample that ``make run`` routes;
- `submit`: the command line as a script for ``spark-submit``.
"""
