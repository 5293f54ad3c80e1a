"""Real services for tests that need more than one process: a SeaweedFS S3 store and a Spark
standalone cluster whose worker shares no disk with the driver (fixtures in tests/conftest.py)."""
