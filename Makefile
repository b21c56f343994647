# Two commands on a fresh clone: `make up` (the service on the embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up demo test lint bench mutation clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

up: $(STAMP)  ## API + worker + beat on SQLite with the embedded broker (and the simulated GitHub without credentials)
	$(BIN)/sweepbot up

demo: $(STAMP)  ## the whole story against the simulator; exits 0 when every expected effect happened
	$(BIN)/sweepbot demo --until-done

test: $(STAMP)  ## the test suite (tests marked services need PostgreSQL and Redis on 127.0.0.1)
	$(BIN)/pytest -n 2

lint: $(STAMP)
	$(BIN)/ruff check app workers sim devstack tests bench migrations tools
	$(BIN)/ruff format --check app workers sim devstack tests bench migrations tools
	$(BIN)/mypy

mutation: $(STAMP)  ## mutmut over the core decisions, kill rate per module (minutes a module; not in CI)
	nice -n 10 $(BIN)/python tools/mutation.py

bench: $(STAMP)
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/scheduler.py
	$(BIN)/python bench/scheduler_holds.py
	$(BIN)/python bench/tick.py
	$(BIN)/python bench/dashboard.py
	$(BIN)/python bench/story.py

clean:
	rm -rf $(VENV) .sweepbot .pytest_cache .mypy_cache .ruff_cache
