# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE ?= stacks/requirements/chat-assistant.yaml
DEMO_STACK ?= chat-assistant-prod
DEMO_PLATFORM ?= platform-prod-us-east-1
# The date the committed stack configs are planned as of (README, Bundled examples): planning the demo as of today
# would pick today's Kubernetes version, prices and support warnings and rewrite the committed stack configs.
AS_OF ?= 2026-12-01
# checkov scans the rendered manifests in the test suite. It lives in a virtualenv of its own: installed into the
# project's, it downgrades packages pulumi needs. Pinned (3.3.x); the stamp makes a second `make test` skip the install.
# The same virtualenv holds xds-protos (Envoy's data-plane-api as Python protobufs, which need protobuf 6 while
# pulumi-policy pins 5): the suite parses the proxy's configuration with them.
CHECKOV_VERSION := 3.3.30
XDS_PROTOS_VERSION := 1.85.0
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)-$(XDS_PROTOS_VERSION)

.PHONY: install checkov demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(CHECKOV_STAMP):
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)' 'xds-protos==$(XDS_PROTOS_VERSION)'
	rm -f $(CHECKOV_VENV)/.installed-*
	touch $(CHECKOV_STAMP)

install: $(STAMP)

checkov: $(CHECKOV_STAMP)

demo: $(STAMP)
	$(BIN)/blueprint plan $(EXAMPLE) --as-of $(AS_OF)
	$(BIN)/blueprint preview $(DEMO_PLATFORM)
	$(BIN)/blueprint preview $(DEMO_STACK)

test: $(STAMP) $(CHECKOV_STAMP)
	CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov $(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/plan.py
	$(BIN)/python benchmarks/sizing.py
	$(BIN)/python benchmarks/preview.py
	$(BIN)/python benchmarks/simulate.py

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) *.egg-info preview-out
