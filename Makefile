# Two commands on a fresh machine: `make run` and `make test`. Both create .venv when it is
# missing and (re)install the project when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DB ?= winnow.db
PORT ?= 8501

.PHONY: run test test-fast browser postgres demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,scale]'
	touch $(STAMP)

# The browser test drives Debian's Chromium (Playwright's own download needs the internet).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The store tests also run against a throw-away PostgreSQL server (Debian's initdb/pg_ctl).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  echo "Installing Debian's postgresql for the store tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; }

run: $(STAMP)
	$(BIN)/winnow ui --db $(DB) --sample --port $(PORT)

demo: $(STAMP)
	$(BIN)/winnow demo

# The layering contracts (pyproject.toml [tool.importlinter]) and the doctests are part of
# the build: a broken contract or an example that no longer runs fails `make test`. The
# Streamlit pages (app/ui) are never collected as doctest modules: importing one draws it.
DOCTEST_PATHS := engine app/dataset_rules.py app/io app/store app/service

test: $(STAMP) browser postgres
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider --doctest-modules $(DOCTEST_PATHS)
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-fast: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider --doctest-modules $(DOCTEST_PATHS)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not e2e"

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
