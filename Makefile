# tfrecord-lirs — `make test` runs every test from a fresh clone; `make demo` tells the story.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
CLI := target/release/tfrecord-lirs
export CARGO_TERM_COLOR ?= never

.PHONY: all test venv build lint cargo-test pytest demo bench clean tf-op python-install

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

# python/tfrecord_lirs/_lirs_ops.so: the Rust staticlib (crates/tfrecord-lirs-ffi) and the
# C++ kernels (tf_op/), compiled against the venv's TensorFlow (the .so only loads there).
TF_OP_SO := python/tfrecord_lirs/_lirs_ops.so
tf-op: venv
	$(MAKE) -C tf_op PYTHON=$(abspath $(PY)) CARGO_TARGET_DIR=$(abspath target)

# The `tfrecord_lirs` package, installed editable into the venv.
python-install: $(VENV)/.tfrecord_lirs-installed
$(VENV)/.tfrecord_lirs-installed: python/pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e python
	touch $@

pytest: venv build tf-op python-install
	TFRECORD_LIRS_CLI=$(abspath $(CLI)) $(PY) -m pytest -q tests

test: venv build lint cargo-test pytest

# `make demo`: label-sorted data, the same model trained with stock shuffle(10000) and
# LIRS; prints a table and writes demo_out/results.json and demo_out/convergence.png.
demo: venv tf-op python-install $(VENV)/.demo-installed
	$(PY) demo/lirs_demo.py --out demo_out

$(VENV)/.demo-installed: requirements-demo.txt $(VENV)/.installed
	$(VENV)/bin/pip install --quiet -r requirements-demo.txt
	touch $@

# `make bench`: LIRS against stock tf.data, side by side in one run (not part of `make test`);
# writes BENCHMARKS.md. fio is the disk's own yardstick for the cold-cache row.
bench: venv build tf-op python-install
	command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio; }
	cargo build --release -p tfrecord-lirs --example lirs_bench
	$(PY) benchmarks/run_bench.py --out bench_out --report BENCHMARKS.md

clean:
	cargo clean
	rm -f $(TF_OP_SO)
	rm -rf $(VENV) bench_out demo_out
