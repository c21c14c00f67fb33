# fearless: `make demo`, `make test` (`make test-slow`: the long CPU checks), `make lint`,
# `make format`, `make bench`, `make apidocs`, `make clean`.
# Every target that runs Python first makes .venv (from nothing on a fresh machine) and installs
# fearless into it, editable, with its test and lint extras. The stamp file records that install;
# it is redone only when pyproject.toml changes, so an up-to-date venv is left alone.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.fearless-installed
# Tests compile into a throwaway cache inside the checkout (ignored by git), never ~/.cache.
TEST_CACHE := $(CURDIR)/.cache/test

.PHONY: demo test test-slow lint format bench clean venv apidocs torch-cpu

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@echo "installing fearless and its test/lint tools into $(VENV) (again only when pyproject.toml changes):"
	@echo "  llvmlite, NVIDIA's ptxas/tileiras/libnvvm wheels and cuda-tile (a few hundred MB), pytest,"
	@echo "  ruff and mypy: a minute or two on the first run; pip lists each package as it goes"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar off -e '.[test,lint]'
	$(MAKE) --no-print-directory torch-cpu
	touch $@

# The torch tests (fearless.ops as torch.ops.fearless, autograd, torch.compile) run on the CPU
# against a CPU build of torch (190 MB; PyPI's default build brings several GB of CUDA
# libraries). Where neither this machine's wheel folder nor PyTorch's CPU index is reachable,
# the torch tests skip and say so.
TORCH_CPU ?= torch==2.13.0+cpu
torch-cpu:
	$(BIN)/python -m pip install --progress-bar off '$(TORCH_CPU)' \
	  || $(BIN)/python -m pip install --progress-bar off --index-url https://download.pytorch.org/whl/cpu torch \
	  || echo "warning: no CPU build of torch could be installed: the torch tests will skip"


demo: $(STAMP)
	$(BIN)/fearless demo

test: $(STAMP)
	rm -rf $(TEST_CACHE)
	FEARLESS_VERIFY=1 FEARLESS_CACHE_DIR=$(TEST_CACHE) $(BIN)/python -m pytest -q -n auto

# The long CPU checks that repeat a faster one in another form (pytest's `slow` marker: the
# other dtypes of the largest tileiras compiles), kept out of `make test` for CI's time limit.
test-slow: $(STAMP)
	FEARLESS_VERIFY=1 FEARLESS_CACHE_DIR=$(TEST_CACHE) $(BIN)/python -m pytest -q -n auto -m slow

# The import rules (no cycle among files or packages, C included; no import up the layers of
# docs/design.md §2.1) are tools/check_imports.py, which tests/test_house_rules.py runs too.
lint: $(STAMP)
	$(BIN)/ruff check src tests tools
	$(BIN)/ruff format --check src tests tools
	$(BIN)/mypy
	$(BIN)/python tools/check_imports.py

# The benchmark suite (bench/README.md; the package src/fearless_bench/, its peers the `bench`
# extra): on the GPU, results in bench/results/; with no GPU,
# `make bench BENCH_ARGS=--dry-run` compiles every case and checks it on the simulator.
bench: $(STAMP)
	$(BIN)/fearless bench $(BENCH_ARGS)

# The API reference, from the docstrings of the public modules (pdoc, a test extra), into
# build/api/index.html.
apidocs: $(STAMP)
	FEARLESS_TARGET=sim $(BIN)/python -m pdoc -o build/api fearless fearless.simt
	@echo "API reference: build/api/index.html"

# Rewrites the code the way `make lint` wants it: import order and fixable rules, then layout.
format: $(STAMP)
	$(BIN)/ruff check --fix-only --quiet src tests tools
	$(BIN)/ruff format src tests tools

# Build outputs and caches; the venv stays (rm -rf .venv to rebuild it).
clean:
	rm -rf .cache build dist fearless_dump .pytest_cache .mypy_cache .ruff_cache
	find . \( -path ./$(VENV) -o -path ./.git \) -prune -o \
		-type d \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
