# make run   - create .venv, install xroute, run the main job on the bundled sample data
# make test  - create .venv, install xroute, run every test
# make conformance - differential test against a real RabbitMQ (found, or started on loopback)
# make client-suites - the AMQP clients' own suites on RabbitMQ (5672, found or started) and on xroute serve

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test conformance client-suites venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@bash scripts/make-venv.sh "$(PYTHON)" "$(VENV)"
	@touch $(STAMP)

run: $(STAMP)
	@$(PY) -m xroute.pipeline.sample data/sample 1000000
	$(VENV)/bin/xroute pipeline --definitions data/sample/definitions.json \
		--messages data/sample/messages.parquet --out data/sample-routed --overwrite \
		--keep-columns sent_at

# Two pytest-xdist workers: the tests that hold a JVM or a service (markers spark, s3,
# cluster) run in one of them, in order, on one Spark session, one Connect server, one
# SeaweedFS and one split cluster; the rest are shared out. --durations: the slowest tests.
TEST_WORKERS ?= 2
TEST_ARGS    ?= -n $(TEST_WORKERS) --dist loadgroup --durations=25

test: $(STAMP)
	$(PY) -m pytest $(TEST_ARGS)

conformance: $(STAMP)
	@bash scripts/conformance.sh

client-suites: $(STAMP)
	@XROUTE_PY=$(PY) bash scripts/client-suites.sh

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
