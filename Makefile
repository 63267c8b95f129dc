# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE ?= stacks/requirements/chat-assistant.yaml
DEMO_STACK ?= chat-assistant-prod
DEMO_PLATFORM ?= platform-prod-us-east-1

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/blueprint plan $(EXAMPLE)
	$(BIN)/blueprint preview $(DEMO_PLATFORM)
	$(BIN)/blueprint preview $(DEMO_STACK)

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/plan.py
	$(BIN)/python benchmarks/sizing.py
	$(BIN)/python benchmarks/preview.py
	$(BIN)/python benchmarks/simulate.py

clean:
	rm -rf $(VENV) *.egg-info preview-out
