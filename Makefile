# tfrecord-lirs — `make test` runs every test from a fresh clone; `make demo` tells the story.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
CLI := target/release/tfrecord-lirs
export CARGO_TERM_COLOR ?= never

.PHONY: all test venv venv-bench venv-mosaic build lint cargo-test pytest pytest-without-tf demo bench bench-scale ab clean tf-op \
  py-ext python-install wheel cargo-fuzz fuzz-smoke fuzz docs venv-docs chromium

all: build

# The virtualenv is rebuilt whenever requirements-dev.txt changes.
venv: $(VENV)/.installed
$(VENV)/.installed: requirements-dev.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

# The development build has the test-only storage contract (cargo feature
# `conformance`: the extension's `storage_conformance`); the wheel (python/setup.py) is
# built without it. `build` and `py-ext` are one cargo call over the whole workspace with
# the same features, so the CLI and the extension share one build of the engine (a build
# of the extension alone resolves its dependencies' features apart and compiles the
# engine again: 1-2.5 min on 2 cores).
DEV_FEATURES := --features tfrecord-lirs-py/conformance
build:
	cargo build --release --workspace $(DEV_FEATURES)

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets $(DEV_FEATURES) -- -D warnings
	cargo clippy -p tfrecord-lirs -p tfrecord-lirs-ffi -p tfrecord-lirs-py -p tfrecord-lirs-cli --all-targets --features fault-injection -- -D warnings
	# The bridge to TensorFlow's file systems (checked here; linked only into the op library).
	cargo clippy -p tfrecord-lirs-ffi --all-targets --features tensorflow -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet

# Then the fault-injection tests (panic points exist only with that cargo feature).
cargo-test:
	cargo test --workspace $(DEV_FEATURES)
	cargo test -p tfrecord-lirs -p tfrecord-lirs-ffi -p tfrecord-lirs-cli --features fault-injection

# python/tfrecord_lirs/_lirs.abi3.so: the TensorFlow-free extension (crates/tfrecord-lirs-py,
# PyO3, CPython's stable ABI), in place for the development tree (the wheel builds its own,
# without the test-only `conformance` feature).
PY_EXT := python/tfrecord_lirs/_lirs.abi3.so
py-ext:
	cargo build --release --workspace $(DEV_FEATURES)
	cp target/release/lib_lirs.so $(PY_EXT)

# python/tfrecord_lirs/_lirs_ops.so: the Rust staticlib (crates/tfrecord-lirs-ffi) and the
# C++ kernels (tf_op/), compiled against the venv's TensorFlow (the .so only loads there).
# Also its test build (tf_op/Makefile `test-lib`: the same library plus fault
# injection), which the fault tests load in child processes; never packaged.
TF_OP_SO := python/tfrecord_lirs/_lirs_ops.so
FAULT_LIB := target/tf_op/test/_lirs_ops_fault_injection.so
tf-op: venv
	$(MAKE) -C tf_op PYTHON=$(abspath $(PY)) CARGO_TARGET_DIR=$(abspath target)
	$(MAKE) -C tf_op test-lib PYTHON=$(abspath $(PY)) CARGO_TARGET_DIR=$(abspath target) \
	  TEST_OUT=$(abspath $(FAULT_LIB))
	# The extension's test build (its writers' panic point), beside it; in the fault
	# build's target directory, whose core has the same features.
	CARGO_TARGET_DIR=$(abspath target/fault-injection) cargo build --release \
	  -p tfrecord-lirs-py --features fault-injection
	cp target/fault-injection/release/lib_lirs.so $(dir $(FAULT_LIB))_lirs.abi3.so

# The `tfrecord_lirs` package, installed editable into the venv.
python-install: $(VENV)/.tfrecord_lirs-installed
$(VENV)/.tfrecord_lirs-installed: python/pyproject.toml python/setup.py Cargo.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e python
	touch $@

# `make wheel`: dist/tfrecord_lirs-<version>-py3-none-manylinux_*.whl with the op library
# (built for the venv's TensorFlow 2.21) and the CLI. Built without build isolation (the
# op compiles against the installed TensorFlow), then `auditwheel repair` gives it its
# manylinux tag; TensorFlow's own libraries stay out of the wheel (--exclude): the op
# library uses the ones of the TensorFlow it is loaded into.
# The native files are built for glibc $(WHEEL_GLIBC) (cargo-zigbuild and zig from the venv,
# python/setup.py) and stripped, their debug info kept in $(WHEEL_DEBUG); auditwheel
# must then give the wheel manylinux_$(WHEEL_GLIBC) (--plat: it fails otherwise). The Rust
# parts use Cargo.toml's `wheel` profile (whose output is target/wheel, kept between runs).
WHEEL_RAW := target/wheel-raw
WHEEL_GLIBC := 2.28
WHEEL_DEBUG := target/wheel-debug
wheel: venv
	rm -rf $(WHEEL_RAW) $(WHEEL_DEBUG) python/build
	PATH="$(abspath $(VENV))/bin:$$PATH" TFRECORD_LIRS_GLIBC=$(WHEEL_GLIBC) \
	  TFRECORD_LIRS_DEBUG_DIR=$(abspath $(WHEEL_DEBUG)) \
	  $(PY) -m pip wheel --quiet --no-build-isolation --no-deps -w $(WHEEL_RAW) ./python
	rm -f dist/tfrecord_lirs-*.whl
	PATH="$(abspath $(VENV))/bin:$$PATH" auditwheel repair --exclude 'libtensorflow_framework.so.2' \
	  --exclude 'libtensorflow_cc.so.2' --plat manylinux_$(subst .,_,$(WHEEL_GLIBC))_x86_64 \
	  -w dist $(WHEEL_RAW)/tfrecord_lirs-*.whl
	ls -l dist/tfrecord_lirs-*.whl

# tests/test_wheel.py installs the wheel into fresh venvs (with `tensorflow`, and with
# the [cpu] extra); it builds it with `make wheel` itself when run alone.
pytest: venv build py-ext tf-op python-install wheel
	TFRECORD_LIRS_CLI=$(abspath $(CLI)) TFRECORD_LIRS_WHEEL_DIR=$(abspath dist) \
	  TFRECORD_LIRS_FAULT_LIBRARY=$(abspath $(FAULT_LIB)) $(PY) -m pytest -q tests \
	  --ignore=tests/without_tf --ignore=tests/docs_site

# The TensorFlow-free front ends with real Grain and PyTorch (DataLoader worker
# processes), in a venv that has no TensorFlow at all (requirements-without-tf.txt):
# the package from the tree (PYTHONPATH), its extension built in place.
VENV_NOTF := .venv-without-tf
venv-without-tf: $(VENV_NOTF)/.installed
$(VENV_NOTF)/.installed: requirements-without-tf.txt
	python3 -m venv $(VENV_NOTF)
	$(VENV_NOTF)/bin/pip install --quiet --upgrade pip
	$(VENV_NOTF)/bin/pip install --quiet -r requirements-without-tf.txt
	touch $@

pytest-without-tf: venv-without-tf build py-ext
	! $(VENV_NOTF)/bin/python -c "import tensorflow" 2>/dev/null
	PYTHONPATH=$(abspath python) TFRECORD_LIRS_CLI=$(abspath $(CLI)) \
	  $(VENV_NOTF)/bin/python -m pytest -q tests/without_tf


test: venv build lint cargo-test pytest pytest-without-tf fuzz-smoke

# `make docs`: the site (mkdocs-material, mkdocs.yml) into site/, built offline with
# --strict (a broken link, anchor or API reference fails it), the workspace's `cargo doc`
# into site/rust/, the benchmark charts redrawn (docs/charts.py: from bench_out/results.json
# when `make bench` left one, else from BENCHMARKS.md), then the built pages opened in
# headless Chromium (tests/docs_site: each renders, no console error; screenshots in
# site/screenshots/). Its tools live in .venv-docs (requirements-docs.txt) and Debian's
# chromium and chromium-driver (installed when missing). The runnable snippets of README
# and docs/ are not run here: `make test` runs them (tests/test_doc_snippets.py,
# tests/without_tf/test_doc_snippets.py).
VENV_DOCS := .venv-docs
venv-docs: $(VENV_DOCS)/.installed
$(VENV_DOCS)/.installed: requirements-docs.txt
	python3 -m venv $(VENV_DOCS)
	$(VENV_DOCS)/bin/pip install --quiet --upgrade pip
	$(VENV_DOCS)/bin/pip install --quiet -r requirements-docs.txt
	touch $@

chromium:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver; fi

docs: venv-docs chromium
	$(VENV_DOCS)/bin/python docs/charts.py
	NO_MKDOCS_2_WARNING=1 $(VENV_DOCS)/bin/mkdocs build --strict --quiet
	cargo doc --no-deps --workspace --quiet
	rm -rf site/rust
	cp -r target/doc site/rust
	$(VENV_DOCS)/bin/python -m pytest -q --noconftest -p no:cacheprovider tests/docs_site

# Fuzzing (fuzz/README.md): cargo-fuzz, pinned, installed only if that version is not
# there already (it takes ~3 min to build on 2 cores).
CARGO_FUZZ_VERSION := 0.13.2
cargo-fuzz:
	@if [ "$$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $(CARGO_FUZZ_VERSION)" ]; then \
	  cargo install --locked cargo-fuzz --version $(CARGO_FUZZ_VERSION); fi

# `make fuzz-smoke` (part of `make test`): every target for FUZZ_SMOKE_SECONDS from its
# regression inputs; fails on any finding or sanitizer report. `make fuzz`: the long
# runs, FUZZ_SECONDS (10 min) per target.
FUZZ_SMOKE_SECONDS ?= 60
FUZZ_SECONDS ?= 600
fuzz-smoke: cargo-fuzz
	fuzz/run_targets.sh $(FUZZ_SMOKE_SECONDS)

fuzz: cargo-fuzz
	fuzz/run_targets.sh $(FUZZ_SECONDS)

# `make demo`: label-sorted data, the same model trained with stock shuffle(10000) and
# LIRS; prints a table and writes demo_out/results.json and demo_out/convergence.png.
# Then data refurbishing (scikit-learn's digits as PNG Examples): standard augmentation vs
# refurbish r=3 vs data echoing vs none; demo_out/refurbish.json and refurbish.png.
demo: venv tf-op python-install $(VENV)/.demo-installed
	$(PY) demo/lirs_demo.py --out demo_out
	$(PY) demo/refurbish_demo.py --out demo_out

$(VENV)/.demo-installed: requirements-demo.txt $(VENV)/.installed
	$(VENV)/bin/pip install --quiet -r requirements-demo.txt
	touch $@

# The benchmarks' own venv (requirements-bench.txt: HuggingFace `datasets`, the Arrow
# contender of the large-record rows), apart from the dev venv's pins.
VENV_BENCH := .venv-bench
venv-bench: $(VENV_BENCH)/.installed
$(VENV_BENCH)/.installed: requirements-bench.txt
	python3 -m venv $(VENV_BENCH)
	$(VENV_BENCH)/bin/pip install --quiet --upgrade pip
	$(VENV_BENCH)/bin/pip install --quiet -r requirements-bench.txt
	touch $@

# MosaicML Streaming's own venv (requirements-mosaic.txt: numpy<2.2 and torch), the
# local-cache contender of bench row 16 (benchmarks/mosaic_bench.py).
VENV_MOSAIC := .venv-mosaic
venv-mosaic: $(VENV_MOSAIC)/.installed
$(VENV_MOSAIC)/.installed: requirements-mosaic.txt
	python3 -m venv $(VENV_MOSAIC)
	$(VENV_MOSAIC)/bin/pip install --quiet --upgrade pip
	$(VENV_MOSAIC)/bin/pip install --quiet -r requirements-mosaic.txt
	touch $@

# Scale rows (10^6..10^8 instances; not part of `make test` or `make bench`: ~2.5 GB
# of files under /tmp at 10^8, generated and removed by the script). SCALE_SIZES
# narrows it, e.g. `make bench-scale SCALE_SIZES=1e6,1e7`.
SCALE_SIZES ?= 1e6,1e7,1e8
bench-scale: venv tf-op python-install
	$(PY) benchmarks/scale_bench.py --sizes $(SCALE_SIZES) --out bench_out/scale.json \
	  --report bench_out/scale.md

# `make bench`: LIRS against stock tf.data, side by side in one run (not part of `make test`);
# writes BENCHMARKS.md. fio is the disk's own yardstick for the cold-cache row.
bench: venv venv-without-tf venv-bench venv-mosaic build py-ext tf-op python-install
	command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio; }
	# tc (iproute2): the kernel latency (netem) of the S3 row.
	command -v tc >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2; }
	cargo build --release -p tfrecord-lirs --example lirs_bench
	# The object-storage rows' S3 server (its own crate, outside the workspace).
	CARGO_TARGET_DIR=$(abspath target) cargo build --release --locked \
	  --manifest-path benchmarks/s3-bench-server/Cargo.toml
	$(PY) benchmarks/run_bench.py --out bench_out --report BENCHMARKS.md
	# The docs' charts, redrawn from this run's bench_out/results.json (commit docs/img/bench/).
	$(PY) docs/charts.py

# `make ab BEFORE=<rev> [AFTER=<rev>]`: bench rows 1-3 and 10 of the tree at BEFORE and at
# AFTER (default HEAD), each built apart under target/ab/, interleaved in one run; prints
# each row's ratio of the best rounds and the paired ratios' geometric mean with its 95 %
# interval, and fails only on a row slower beyond the noise (benchmarks/ab.py; BENCH_SCALE
# applies).
AFTER ?= HEAD
AB_ROUNDS ?= 6
ab: venv
	@test -n "$(BEFORE)" || { echo "usage: make ab BEFORE=<rev> [AFTER=<rev>]"; exit 2; }
	command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio; }
	$(PY) benchmarks/ab.py --before $(BEFORE) --after $(AFTER) --rounds $(AB_ROUNDS) \
	  --venv $(abspath $(VENV)) --venv-without-tf $(abspath $(VENV_NOTF)) \
	  --venv-bench $(abspath $(VENV_BENCH))

clean:
	cargo clean
	rm -f $(TF_OP_SO) python/tfrecord_lirs/_build_info.py
	rm -f $(PY_EXT)
	rm -rf $(VENV) $(VENV_NOTF) $(VENV_BENCH) $(VENV_MOSAIC) bench_out demo_out dist python/build site $(VENV_DOCS)
