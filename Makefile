# One entry point for everything: `make demo` runs the demo, `make test` runs the whole suite.
# Both set up what they need on a fresh machine (virtualenv, packages, PostgreSQL database).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PG_URL ?= postgres://root@127.0.0.1:5432/jobs
SQLITE_URL ?= sqlite:///$(CURDIR)/var/jobs.sqlite3
PYTEST_ARGS ?=
# Extra arguments of the PostgreSQL stage alone. `make test` sets them to leave out the browser
# and broker tests there: they run once per Python line, on SQLite (the pages do not depend on
# the database; a broker's messages only wake a worker, whose claim is tested on both; and they
# take minutes a stage). `make test-postgres` alone runs everything.
PG_PYTEST_ARGS ?=

.PHONY: install screenshots demo test test-sqlite test-postgres lint typecheck migrations-check docs postgres chromium pgbouncer redis rabbitmq test-newest-python test-package clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# The demo runs with DEBUG on (runserver then serves the static files, with a development key)
# unless you set DEBUG=0 and a SECRET_KEY yourself.
demo: export DEBUG ?= 1
demo: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	@echo "Demo at http://127.0.0.1:8000/  logins alice/alice, bob/bob; admin at /admin/ (admin/admin)"
	$(PY) manage.py runworker & worker=$$!; trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
		$(PY) manage.py runserver 127.0.0.1:8000

# The documentation's screenshots (docs/images/), taken from the demo in Chromium.
screenshots: install chromium
	$(PY) docs/screenshots.py

# The whole suite: lint, type check, migrations check, the documentation site, then every test
# on SQLite and on PostgreSQL, and again with Django 6 on a newer Python when the machine has
# one; then, once, the package.
test: lint typecheck migrations-check docs test-sqlite test-postgres test-newest-python test-package
test: PG_PYTEST_ARGS = -m "not browser and not broker"

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy with django-stubs over the jobs package, configured in pyproject.toml ([tool.mypy]).
typecheck: install
	$(VENV)/bin/mypy

migrations-check: install
	DJANGO_SETTINGS_MODULE=tests.settings $(PY) manage.py makemigrations --check --dry-run

# The documentation site (docs/, Sphinx with MyST pages and autodoc) into docs/_build/html; any
# warning fails the build. Its Python examples are run by tests/process/test_docs_examples.py.
docs: install
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

test-sqlite: install chromium redis rabbitmq
	@echo "== $$($(PY) -c 'import django, sys; print(f"Python {sys.version.split()[0]}, Django {django.__version__}")') on SQLite"
	DATABASE_URL=$(SQLITE_URL) $(PY) -m pytest $(PYTEST_ARGS)

test-postgres: install postgres chromium pgbouncer redis rabbitmq
	@echo "== $$($(PY) -c 'import django, sys; print(f"Python {sys.version.split()[0]}, Django {django.__version__}")') on PostgreSQL"
	DATABASE_URL=$(PG_URL) $(PY) -m pytest $(PG_PYTEST_ARGS) $(PYTEST_ARGS)

postgres:
	PG_URL=$(PG_URL) .ci/ensure-postgres

chromium:
	.ci/ensure-chromium

pgbouncer:
	.ci/ensure-pgbouncer

redis:
	.ci/ensure-redis

rabbitmq:
	.ci/ensure-rabbitmq

test-newest-python:
	@newer=$$(.ci/find-newer-python); \
	if [ -n "$$newer" ]; then \
		$(MAKE) --no-print-directory test-sqlite test-postgres PYTHON=$$newer VENV=.venv-newest \
			PG_PYTEST_ARGS='$(PG_PYTEST_ARGS)'; \
	else \
		echo "== no Python >= 3.12 on this machine: the Django 6 run is left out"; \
	fi

# Build the sdist and wheel, twine check them, and install the wheel (not this tree) in fresh
# virtualenvs of $(PYTHON) and of every Python >= 3.12 found, each running a project made on the
# spot: migrate, a Django @task enqueued, runworker --burst, the status view and the admin.
# Two variants of the project: with the admin, and without django.contrib.admin, sessions and
# messages.
test-package: install
	$(PY) tests/packaging/check_package.py \
		--python $(PYTHON) $$(.ci/find-newer-python --all | sed 's/^/--python /')

clean:
	rm -rf .venv .venv-newest var/*.sqlite3* .pytest_cache .ruff_cache .mypy_cache build dist *.egg-info docs/_build
