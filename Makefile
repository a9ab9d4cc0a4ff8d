# The README's two commands: `make demo` and `make test`. Everything runs from a virtual
# environment in .venv made from the system's python3; broker jars come from Maven Central once.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit integration bench plot jars clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,spark,cli]'
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

# kafka-python is the Python peer of bench/strategies.py only, and matplotlib draws the charts
# (bench/plot.py): installed here, never dependencies of the package (matplotlib is in the test
# extra too, for bench/plot.py's own tests).
# bench/consumer.py starts its own broker (or uses CLIENT_BALANCE_BOOTSTRAP_SERVERS); its peer,
# confluent-kafka, is a dependency already. Each script's JSON lines go to the terminal and to
# bench/results/<script>.jsonl (pipefail: a failed script fails the target despite tee); `make
# plot` draws docs/img/bench-*.png from those files again.
KAFKA_PYTHON := kafka-python==3.0.12
MATPLOTLIB := matplotlib==3.11.2
BENCH_RESULTS := bench/results

bench plot: SHELL := /bin/bash
bench plot: .SHELLFLAGS := -o pipefail -c

bench: jars
	$(PY) -m pip install --quiet '$(KAFKA_PYTHON)' '$(MATPLOTLIB)'
	mkdir -p $(BENCH_RESULTS)
	$(PY) bench/broker_start.py | tee $(BENCH_RESULTS)/broker_start.jsonl
	$(PY) bench/strategies.py | tee $(BENCH_RESULTS)/strategies.jsonl
	$(PY) bench/consumer.py | tee $(BENCH_RESULTS)/consumer.jsonl
	$(PY) bench/elastic.py | tee $(BENCH_RESULTS)/elastic.jsonl
	$(PY) bench/scale.py | tee $(BENCH_RESULTS)/scale.jsonl
	$(PY) bench/spark.py | tee $(BENCH_RESULTS)/spark.jsonl
	$(MAKE) plot

plot: $(STAMP)
	$(PY) -m pip install --quiet '$(MATPLOTLIB)'
	$(PY) bench/plot.py $(BENCH_RESULTS)/*.jsonl --out docs/img

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
