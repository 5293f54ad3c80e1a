"""The pipeline's batch layer: pure Arrow, no Spark (docs/pipeline.md). Everything that runs on
Spark is `xroute.spark`, built on this.

- `transform`: THE routing step (`route_columns`, the batch function of `xroute.spark.route`),
  naming records, and a routed batch as the three outputs (`outputs_of`);
- `names`: the columns' names;
- `commit`, `delta`, `output`, `stream_commit`: staging, proving and publishing outputs
  (Parquet folders with ``_SUCCESS``, or Delta tables), on any storage;
- `summary`, `stream_summary`, `figures`: counts, per-queue and per-binding figures;
- `engine`: the topic engine a pipeline uses by default;
- `sample`: the realistic sample that ``make run`` routes.
"""
