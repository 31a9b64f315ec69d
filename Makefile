# tfrecord-lirs — `make test` runs every test from a fresh clone; `make demo` tells the story.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
CLI := target/release/tfrecord-lirs
export CARGO_TERM_COLOR ?= never

.PHONY: all test venv build lint cargo-test pytest demo bench clean

all: build

# The virtualenv is rebuilt whenever requirements-dev.txt changes.
venv: $(VENV)/.installed
$(VENV)/.installed: requirements-dev.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

build:
	cargo build --release --workspace

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

cargo-test:
	cargo test --workspace

pytest: venv build
	TFRECORD_LIRS_CLI=$(abspath $(CLI)) $(PY) -m pytest -q tests

test: venv build lint cargo-test pytest

clean:
	cargo clean
	rm -rf $(VENV) bench_out demo_out
