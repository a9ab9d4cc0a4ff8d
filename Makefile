# The README's two commands: `make demo` and `make test`. Everything runs from a virtual
# environment in .venv made from the system's python3; broker jars come from Maven Central once.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit integration bench jars clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,spark]'
	touch $(STAMP)

jars: $(STAMP)
	$(PY) -m client_balance broker fetch

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

test: lint jars
	$(PY) -m pytest -v -p no:cacheprovider

unit: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider tests/unit

demo: jars
	$(PY) examples/demo.py

# kafka-python is the Python peer of bench/strategies.py only: installed here, never a dependency
# of the package or of `make test`. bench/consumer.py starts its own broker (or uses
# CLIENT_BALANCE_BOOTSTRAP_SERVERS); its peer, confluent-kafka, is a dependency already.
KAFKA_PYTHON := kafka-python==3.0.12

bench: jars
	$(PY) -m pip install --quiet '$(KAFKA_PYTHON)'
	$(PY) bench/broker_start.py
	$(PY) bench/strategies.py
	$(PY) bench/consumer.py
	$(PY) bench/elastic.py
	$(PY) bench/scale.py
	$(PY) bench/spark.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
