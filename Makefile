# Two entry points for a fresh machine: `make demo` and `make test`.
#
# Installs come from committed locks with uv: `uv.lock` (the project, `uv sync --locked`) and tests/tools/checkov.lock
# (the test suite's separate tools, with hashes), so a fresh clone installs exactly the versions the tests passed with.
# uv is the one on PATH, else a pinned copy bootstrapped with pip into .uv/. It uses the machine's Python
# (UV_PYTHON_DOWNLOADS=never): no interpreter is downloaded.
PYTHON ?= python3
UV_VERSION := 0.13.9
UV_BOOTSTRAP := .uv/bin/uv
UV ?= $(or $(shell command -v uv 2>/dev/null),$(UV_BOOTSTRAP))
export UV_PYTHON ?= $(PYTHON)
export UV_PYTHON_DOWNLOADS := never
# uv installs without compiling bytecode (compiling the project's virtualenv takes 14 s of wall time, 28 s of CPU on 2
# cores, and did not make a fresh clone's first `make test` measurably faster: 509 s of CPU without, 502 s with);
# Python then caches each module it imports on first use. A PYTHONDONTWRITEBYTECODE in the environment would make
# every run recompile what it imports (~7 s of pulumi_aws per preview), so the project's commands run without it.
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE ?= stacks/requirements/chat-assistant.yaml
DEMO_STACK ?= chat-assistant-prod
DEMO_PLATFORM ?= platform-prod-us-east-1
# The date the committed stack configs are planned as of (docs/getting-started.md, Bundled examples): planning the demo as of today
# would pick today's Kubernetes version, prices and support warnings and rewrite the committed stack configs.
AS_OF ?= 2026-12-01
# checkov scans the rendered manifests in the test suite. It lives in a virtualenv of its own: installed into the
# project's, it downgrades packages pulumi needs. The same virtualenv holds xds-protos (Envoy's data-plane-api as
# Python protobufs, which need protobuf 6 while pulumi-policy pins 5): the suite parses the proxy's configuration
# with them, and huggingface_hub and awscli parse our containers' command lines with their own CLIs (huggingface_hub
# pins a typer below the project's). Pinned in tests/tools/checkov.in, locked with hashes in tests/tools/checkov.lock.
CHECKOV_VENV := .venv-checkov
CHECKOV_LOCK := tests/tools/checkov.lock
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# The measured vLLM step tables (blueprints/catalog/step_tables/) are generated with NVIDIA AIConfigurator in a
# virtualenv of its own (tools/step_tables/requirements.txt, with hashes): the planner reads the tables, never the
# library (614 MB with pandas, pyarrow and scipy; Python < 3.14 only). `make step-tables` regenerates them.
AIC_VENV := .venv-aic
AIC_LOCK := tools/step_tables/requirements.txt
AIC_STAMP := $(AIC_VENV)/.installed
# The suite parses the command lines our containers run with the engines' own parsers, in the tools virtualenv with
# torch stood in: `vllm serve` and `vllm bench serve` with vLLM 0.24.0's (tests/tools/vllm_serve_argv.py,
# vllm_bench_argv.py), SGLang's server with SGLang 0.5.14's (tests/tools/sglang_argv.py). They read the package's
# Python files from the release's archive on PyPI (vLLM's sdist, SGLang's wheel), checked against its sha256
# (tools/engine_source/fetch.py), into .tools/<engine>-<version>.
VLLM_SOURCE := .tools/vllm-0.24.0
SGLANG_SOURCE := .tools/sglang-0.5.14
ENGINE_SOURCE_STAMPS := $(VLLM_SOURCE)/.installed $(SGLANG_SOURCE)/.installed
# pytest workers (pytest-xdist): one more than the cores, because some tests wait rather than compute (a real
# Prometheus starting and scraping, checkov, promtool, the engines' parsers in their own interpreter): on 2 cores the
# suite took 455 s with 2 workers, 373 s with 3 and 396 s with 4. Each starts on its share of the tests and an idle
# one takes over half of what another has left (`--dist worksteal`): whole files per worker (`loadfile`) left one
# worker 20 minutes on the files that re-plan the project (test_hand_edits, test_one_gate) after the other had finished.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
# The property tests replay the same examples each run (Hypothesis profile `ci`, tests/conftest.py);
# `HYPOTHESIS_PROFILE=thorough make test` explores new ones, ten times each test's budget.
PYTEST := CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov VLLM_SOURCE=$(CURDIR)/$(VLLM_SOURCE) \
	SGLANG_SOURCE=$(CURDIR)/$(SGLANG_SOURCE) $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal

.PHONY: install test-tools demo test test-slow docs lint-imports bench fit-check clean step-tables

$(UV_BOOTSTRAP):
	$(PYTHON) -m pip install --quiet --target .uv 'uv==$(UV_VERSION)'

$(STAMP): pyproject.toml uv.lock | $(UV)
	$(UV) sync --locked --quiet
	touch $(STAMP)

$(CHECKOV_STAMP): $(CHECKOV_LOCK) | $(UV)
	test -x $(CHECKOV_VENV)/bin/python || $(UV) venv --quiet $(CHECKOV_VENV)
	$(UV) pip install --quiet --python $(CHECKOV_VENV)/bin/python --require-hashes -r $(CHECKOV_LOCK)
	touch $(CHECKOV_STAMP)

# .tools/<engine>-<version>/.installed: the engine's source (the version is fetch.py's, RELEASES).
$(ENGINE_SOURCE_STAMPS): .tools/%/.installed: tools/engine_source/fetch.py | $(STAMP)
	$(BIN)/python tools/engine_source/fetch.py $(firstword $(subst -, ,$*)) .tools/$*
	touch $@

install: $(STAMP)

$(AIC_STAMP): $(AIC_LOCK) | $(UV)
	test -x $(AIC_VENV)/bin/python || $(UV) venv --quiet $(AIC_VENV)
	$(UV) pip install --quiet --python $(AIC_VENV)/bin/python --require-hashes -r $(AIC_LOCK)
	touch $(AIC_STAMP)

step-tables: $(AIC_STAMP)
	$(AIC_VENV)/bin/python tools/step_tables/refresh.py

# What the suite runs besides the project: checkov's virtualenv and the engines' sources (`make test` installs them too).
test-tools: $(CHECKOV_STAMP) $(ENGINE_SOURCE_STAMPS)

demo: $(STAMP)
	$(BIN)/blueprint plan $(EXAMPLE) --as-of $(AS_OF)
	$(BIN)/blueprint preview $(DEMO_PLATFORM)
	$(BIN)/blueprint preview $(DEMO_STACK)

# The documentation site (mkdocs.yml): docs/ with the reference pages generated from the code at build time
# (tools/docs/hooks.py), strict (a broken link or anchor, or a page outside the nav, fails), into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint-imports: $(STAMP)
	$(BIN)/lint-imports --no-cache

# `make test` leaves out the tests marked slow (the full-breadth variants of checks it makes on a representative
# part, e.g. checkov over every bundled stack rather than one per archetype); `make test-slow` runs them, and CI both.
test: $(STAMP) $(CHECKOV_STAMP) $(ENGINE_SOURCE_STAMPS) lint-imports
	$(PYTEST) -m "not slow"

test-slow: $(STAMP) $(CHECKOV_STAMP) $(ENGINE_SOURCE_STAMPS)
	$(PYTEST) -m slow

# The committed capacity fit (blueprints/catalog/capacity-fit.yaml) is what the fit on today's points and code gives:
# ~10 minutes on 2 cores, so CI runs it after the tests rather than inside them.
fit-check: $(STAMP)
	$(BIN)/python benchmarks/sizing.py --cross-validate --check

bench: $(STAMP)
	$(BIN)/python benchmarks/plan.py
	$(BIN)/python benchmarks/sizing.py
	$(BIN)/python benchmarks/preview.py
	$(BIN)/python benchmarks/simulate.py

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(AIC_VENV) .tools .uv *.egg-info preview-out site .hypothesis .pytest_cache
