"""Benchmarks: the seeds' workloads, peers, experiments, plots and reports."""
