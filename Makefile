# Two commands on a fresh clone: `make demo` and `make test`.
# Both create .venv when absent and install the package into it; both are quick once set up.
#
# Which torch wheel: by default pip's normal one (on Linux, the CUDA build). CPU=1 takes the
# CPU-only build from PyTorch's CPU wheel index, for a machine without a GPU:
# `make demo CPU=1`. TORCH_SPEC pins a version (CI pins the CPU build that lies on its disk:
# `make test TORCH_SPEC=torch==2.13.0`); the two combine.
PYTHON ?= python3
VENV ?= .venv
# pytest-xdist workers; a notebook's cells share one kernel, so a file's tests stay on one worker
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile
TORCH_SPEC ?= torch
CPU ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_INDEX := $(if $(filter 1 yes true,$(CPU)),--index-url $(TORCH_CPU_INDEX))
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast lint format flops bench notebooks lab clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[dev]"
	@touch $(STAMP)

# Your demo goes to runs/demo/ (untracked); the committed reference (results/demo.json, figures/)
# is regenerated only on purpose: `looped demo --reference && looped report`.
demo: $(STAMP)
	$(BIN)/looped demo

flops: $(STAMP)
	$(BIN)/looped flops

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest tests notebooks --nbval-lax --nbval-current-env -p no:cacheprovider $(XDIST)

# The inner loop: lint and the tests not marked slow (no training grids, subprocesses, torchrun
# or notebooks); about 40 s of pytest on an idle 2-core CPU.
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest tests -m "not slow" -p no:cacheprovider $(XDIST)

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

notebooks: $(STAMP)
	$(BIN)/jupytext --sync notebooks/*.py

# JupyterLab reads settings overrides from <sys.prefix>/share/jupyter/lab/settings/: ours open
# README.md and docs/ as rendered Markdown, and the paired .py notebooks as notebooks (jupytext).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

lab: $(STAMP) $(LAB_OVERRIDES)
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

$(LAB_OVERRIDES): notebooks/jupyterlab-overrides.json $(STAMP)
	@mkdir -p $(dir $@)
	cp $< $@

bench: $(STAMP)
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python scripts/bench.py

clean:
	rm -rf $(VENV) build *.egg-info
