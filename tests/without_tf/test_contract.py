"""The front-end contract: every default and every error class is the Rust core's
(crates/tfrecord-lirs/src/options/), and each front end either takes it from there or
is checked against it here: the Python signatures (None for "default"), the
TensorFlow op's attrs (tf_op/lirs_ops.cc, which C++ cannot take from Rust), the CLI's
`--help`, and docs/FORMAT.md's list of error kinds."""

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

from tfrecord_lirs import _lirs, errors

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "tfrecord_lirs"
CLI = Path(os.environ.get("TFRECORD_LIRS_CLI") or REPO / "target" / "release" / "tfrecord-lirs")

DEFAULTS = _lirs.defaults()

# The attr names that differ from the core's table: both ops', then LIRSDataset's.
OP_ATTR_DEFAULT = {"cache_bytes": "op_cache_bytes"}
DATASET_ATTR_DEFAULT = {**OP_ATTR_DEFAULT, "batch_size": "dataset_batch_size",
                        "deterministic": "dataset_deterministic",
                        "seed_rule": "op_seed_rule"}
# Attrs with no user-facing default in the table (empty: not given).
OP_ATTR_WITHOUT_DEFAULT = {"epoch_state", "metadata", "cache_dir"}


def test_the_core_exports_each_default_once():
    assert DEFAULTS["page_size"] == 4096
    assert DEFAULTS["order_version"] == 1
    assert DEFAULTS["backend"] == "auto"
    assert DEFAULTS["fit"] == "next"
    assert DEFAULTS["num_parallel_reads"] == -1
    assert all(isinstance(v, (bool, int, str)) for v in DEFAULTS.values())


def _op_attrs():
    """(op, attr, type, default text) of every `.Attr("name: type = default")` of the
    op registrations, those of a `#define NAME` list of attrs where `.NAME` is used."""
    text = (REPO / "tf_op" / "lirs_ops.cc").read_text()
    attr = r'\.?Attr\("(\w+): (\w+) = ([^"]*)"\)'
    lists = {m.group(1): re.findall(attr, m.group(2))
             for m in re.finditer(r"#define (\w+)((?:.*\\\n)*.*)", text)}
    attrs = []
    op = None
    in_define = False
    for line in text.splitlines():
        # A #define's lines run to the first one not ending in a backslash.
        in_define = line.startswith("#define") or in_define
        if in_define:
            in_define = line.endswith("\\")
            continue
        m = re.search(r'REGISTER_OP\("(\w+)"\)', line)
        if m:
            op = m.group(1)
        m = re.search(attr, line)
        if m:
            attrs.append((op, *m.groups()))
        m = re.fullmatch(r"\s*\.(\w+)", line)
        if m and m.group(1) in lists:
            attrs.extend((op, *a) for a in lists[m.group(1)])
    return attrs


def _attr_value(kind, text):
    if kind == "int":
        return int(text)
    if kind == "bool":
        return {"true": True, "false": False}[text]
    assert kind == "string", kind
    return text.strip("'")


def test_the_op_attrs_defaults_are_the_cores():
    attrs = _op_attrs()
    assert {(op, name) for op, name, _, _ in attrs} >= {
        ("LIRSDataset", "page_size"), ("LIRSDataset", "order_version"),
        ("LIRSDataset", "shard_remainder"), ("LIRSDataset", "cache_dir"),
        ("LIRSDataset", "cache_bytes"),
        ("LIRSRead", "page_size"), ("LIRSRead", "backend"), ("LIRSRead", "cache_dir"),
        ("LIRSRead", "cache_bytes"), ("LIRSDataset", "index_missing"),
        ("LIRSRead", "index_missing")}
    for op, name, kind, text in attrs:
        if name in OP_ATTR_WITHOUT_DEFAULT:
            assert _attr_value(kind, text) == "", (op, name)
            continue
        key = (OP_ATTR_DEFAULT if op == "LIRSRead" else DATASET_ATTR_DEFAULT).get(name, name)
        assert key in DEFAULTS, f"{op}.{name} has a default the core does not list"
        assert _attr_value(kind, text) == DEFAULTS[key], (op, name, text, DEFAULTS[key])


def _signatures():
    """(where, parameter, default node) of every parameter with a default in the
    package's Python functions (read as source: the TensorFlow modules too)."""
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, default in pairs:
                yield f"{path.name}:{node.lineno} {node.name}", arg.arg, default


def test_python_signatures_take_none_for_each_core_default():
    # Each argument the core has a default for defaults to None in Python (the core
    # applies it), so no Python file repeats a default.
    checked = set()
    for where, name, default in _signatures():
        key = "best_fit_lookahead" if name == "window" else name
        if key not in DEFAULTS:
            continue
        checked.add(name)
        # None (the core applies its default), or where None is refused (LIRSDataset's
        # backend) the core's value itself: `_op_library.DEFAULTS["name"]`.
        from_core = (isinstance(default, ast.Subscript)
                     and ast.unparse(default) == f"_op_library.DEFAULTS[{name!r}]")
        assert from_core or (isinstance(default, ast.Constant) and default.value is None), (
            f"{where}: {name}={ast.unparse(default)}; give None (the core's default is "
            f"{DEFAULTS[key]!r})")
    assert {"page_size", "backend", "trust_table", "order_version", "seed", "batch_size",
            "num_shards", "shard_index", "fit", "page_aware", "jobs",
            "shard_remainder", "reuse_factor", "cache_bytes", "index_missing"} <= checked


def test_the_package_writes_no_default_page_size():
    for path in sorted(PACKAGE.glob("*.py")):
        assert "4096" not in path.read_text(), path


def _help_defaults(*command):
    """{flag: default text} of `tfrecord-lirs COMMAND --help`."""
    if not CLI.exists():
        pytest.skip(f"no CLI at {CLI} (cargo build --release, or set TFRECORD_LIRS_CLI)")
    text = subprocess.run([str(CLI), *command, "--help"], capture_output=True, text=True,
                          check=True).stdout
    found = {}
    for block in re.split(r"\n(?=\s+(?:-\w, )?--)", text):
        m = re.match(r"\s+(?:-\w, )?--([\w-]+)", block)
        d = re.search(r"\[default: ([^\]]+)\]", block)
        if m and d:
            found[m.group(1).replace("-", "_")] = d.group(1)
    return found


@pytest.mark.parametrize("command", [("pad",), ("order",), ("index",), ("verify",), ("get",)])
def test_the_cli_help_shows_the_cores_defaults(command):
    found = _help_defaults(*command)
    for flag, text in found.items():
        key = {"window": "best_fit_lookahead"}.get(flag, flag)
        if key not in DEFAULTS or " " in text:
            continue  # not an option with a default, or one described in words
        value = DEFAULTS[key]
        assert text == (str(value).lower() if isinstance(value, bool) else str(value)), (
            command, flag, text, value)
    expected = {"pad": {"page_size", "fit", "jobs", "window"},
                "order": {"page_size", "order_version", "epoch", "num_shards", "shard_index",
                          "batch_size", "index_missing"},
                "index": {"jobs"}, "verify": {"jobs"}, "get": {"index_missing"}}[command[0]]
    assert expected <= set(found), found


@pytest.mark.parametrize("bad", [1000, 256, -4096])
def test_one_page_size_rule_one_message(bad, tmp_path):
    # The core words the rule once; Python and the CLI show those words.
    words = f"page_size must be a power of two from 512 to 16777216 bytes, got {bad}"
    from tfrecord_lirs.errors import InvalidArgumentError
    with pytest.raises(InvalidArgumentError) as e:
        _lirs.check_page_size(bad)
    assert words in str(e.value)
    if bad < 0:
        return  # clap refuses a negative number before the rule
    if not CLI.exists():
        pytest.skip(f"no CLI at {CLI} (cargo build --release, or set TFRECORD_LIRS_CLI)")
    res = subprocess.run([str(CLI), "order", str(tmp_path / "x.tfrecord"), "--seed", "1",
                          "--page-size", str(bad)], capture_output=True, text=True)
    assert res.returncode == 2 and words in res.stderr, res.stderr


def test_each_error_kind_has_its_class():
    table = _lirs.error_classes()
    assert [kind for kind, _ in table] == ["DataLoss", "InvalidArgument", "NotFound",
                                           "PermissionDenied", "Unavailable", "Internal"]
    classes = {name for _, name in table}
    assert classes == {c.__name__ for c in errors.LIRSError.__subclasses__()}
    assert classes <= set(errors.__all__)
    # docs/FORMAT.md names every kind `kind()` returns.
    line = next(l for l in (REPO / "docs" / "FORMAT.md").read_text().splitlines()
                if "`kind()`" in l)
    listed = re.search(r"`kind\(\)` \(([^)]*)\)", line).group(1)
    assert [k.strip("`") for k in listed.split(", ")] == [kind for kind, _ in table]


def test_the_extensions_options_default_to_none():
    # The extension's own signatures (its text signatures): an option with a default
    # defaults to None there too, the core applying it (the .pyi stub repeats them and
    # is checked against these below).
    import inspect

    checked = 0
    for name in dir(_lirs):
        obj = getattr(_lirs, name)
        callables = [obj] + ([getattr(obj, m) for m in vars(obj) if not m.startswith("_")]
                             if isinstance(obj, type) else [])
        for fn in callables:
            try:
                parameters = inspect.signature(fn).parameters.values()
            except (TypeError, ValueError):
                continue
            for p in parameters:
                if p.name in DEFAULTS and p.default is not inspect.Parameter.empty:
                    assert p.default is None, (name, fn, p)
                    checked += 1
    assert checked >= 20


def _stub_signatures(text=None):
    """{qualified name: [(parameter, kind, default text or None)] or a marker} of
    python/tfrecord_lirs/_lirs.pyi (or of `text`): "class" for a class, "property" for a
    property, a list with "static" first for a static method."""
    tree = ast.parse(text if text is not None else (PACKAGE / "_lirs.pyi").read_text())
    found = {}

    def params(fn, drop_first):
        a = fn.args
        positional = a.posonlyargs + a.args
        defaults = [None] * (len(positional) - len(a.defaults)) + [
            ast.unparse(d) for d in a.defaults]
        kinds = ["POSITIONAL_ONLY"] * len(a.posonlyargs) + ["POSITIONAL_OR_KEYWORD"] * len(a.args)
        out = [(p.arg, k, d) for p, k, d in zip(positional, kinds, defaults)]
        out = out[1:] if drop_first else out
        if a.vararg:
            out.append((a.vararg.arg, "VAR_POSITIONAL", None))
        out += [(p.arg, "KEYWORD_ONLY", None if d is None else ast.unparse(d))
                for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        if a.kwarg:
            out.append((a.kwarg.arg, "VAR_KEYWORD", None))
        return out

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = params(node, False)
        elif isinstance(node, ast.ClassDef):
            found[node.name] = "class"
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef):
                    decorators = [ast.unparse(d) for d in fn.decorator_list]
                    name = f"{node.name}.__new__" if fn.name == "__new__" else f"{node.name}.{fn.name}"
                    if "property" in decorators:
                        found[name] = "property"
                    elif "staticmethod" in decorators:
                        found[name] = ["static"] + params(fn, False)
                    else:
                        found[name] = params(fn, True)
    return found


# The protocol methods the extension's classes define (no signature to read: none take
# arguments besides self).
_PROTOCOL_SLOTS = ("__len__", "__iter__", "__next__")


def _runtime_signatures():
    """The same, from the extension's text signatures (`__text_signature__`): every
    parameter's name, kind and default."""
    import inspect
    import types

    def params(fn):
        sig = inspect.signature(fn)
        return [(p.name, p.kind.name,
                 None if p.default is inspect.Parameter.empty else repr(p.default))
                for p in sig.parameters.values() if p.name not in ("self", "cls")]

    found = {}
    for name in dir(_lirs):
        obj = getattr(_lirs, name)
        if name.startswith("_") or not callable(obj):
            continue
        if not isinstance(obj, type):
            found[name] = params(obj)
            continue
        found[name] = "class"
        if obj.__text_signature__ is not None:  # None: not constructed from Python
            found[f"{name}.__new__"] = params(obj)
        for m, attr in vars(obj).items():
            if m.startswith("__") and m not in _PROTOCOL_SLOTS:
                continue
            if isinstance(attr, (property, types.GetSetDescriptorType)):
                found[f"{name}.{m}"] = "property"
            elif isinstance(attr, staticmethod):
                found[f"{name}.{m}"] = ["static"] + params(getattr(obj, m))
            else:
                found[f"{name}.{m}"] = [] if m in _PROTOCOL_SLOTS else params(getattr(obj, m))
    return found


def _stub_drift(stub, runtime):
    """What differs between the stub and the extension: names, then signatures."""
    drift = [("in the stub only", n) for n in sorted(set(stub) - set(runtime))]
    drift += [("in the extension only", n) for n in sorted(set(runtime) - set(stub))]
    drift += [(name, stub[name], sig) for name, sig in sorted(runtime.items(), key=str)
              if name in stub and stub[name] != sig]
    return drift


def test_the_stub_matches_the_extension():
    assert _stub_drift(_stub_signatures(), _runtime_signatures()) == []


DEVELOPMENT_ONLY = ("# Development build only:", "# End of the development build's functions.")


def _stub_development_only():
    """The names the stub documents as in the development build only (between its
    DEVELOPMENT_ONLY lines)."""
    text = (PACKAGE / "_lirs.pyi").read_text()
    start, end = (text.index(marker) for marker in DEVELOPMENT_ONLY)
    return set(re.findall(r"^def (\w+)\(", text[start:end], re.M))


def _gated_functions():
    """The extension's functions compiled only with its test-only cargo feature
    `conformance`: each `#[cfg(feature = "conformance")]` `#[pyfunction]` in its source."""
    gated = set()
    for path in sorted((REPO / "crates" / "tfrecord-lirs-py" / "src").rglob("*.rs")):
        gated |= set(re.findall(
            r'#\[cfg\(feature = "conformance"\)\]\s*#\[pyfunction[^\]]*\]\s*(?:///.*\s*)*'
            r"(?:pub(?:\(crate\))? )?fn (\w+)", path.read_text()))
    return gated


def test_test_only_functions_are_documented_as_the_development_builds():
    # The storage contract's cases are test code: compiled only with the cargo feature
    # `conformance` (the wheel has none of them, tests/test_wheel.py), which the
    # development build (`make py-ext`) that runs these tests has; the stub says so.
    gated = _gated_functions()
    assert gated == {"storage_conformance", "storage_conformance_fixtures"}, gated
    assert _stub_development_only() == gated
    assert all(hasattr(_lirs, name) for name in gated), "build the extension with make py-ext"


@pytest.mark.parametrize("before, after", [
    # A parameter renamed, a default changed, a parameter made keyword-only, one
    # dropped, one added as *args, a function or a method or a constructor or a
    # property dropped, a method made static. (The check before read no `*args`, no
    # constructor of a class whose `__new__` the stub left out, and no getter.)
    ("def check_count(name: str, value: Any)", "def check_count(name: str, val: Any)"),
    ("page_size: Optional[int] = None", "page_size: Optional[int] = 4096"),
    ("def check_count(name: str, value: Any)", "def check_count(name: str, *, value: Any)"),
    ("def check_count(name: str, value: Any)", "def check_count(name: str)"),
    ("def check_count(name: str, value: Any)", "def check_count(name: str, value: Any, *more)"),
    ("    @property\n    def seed(self) -> int: ...\n", ""),
    ("def check_count(", "def check_counts("),
    ("    def __new__(cls, schedule: NativeRefurbishSchedule) -> NativeRefurbishSampler: ...\n",
     ""),
    ("    def __len__(self)", "    def __length__(self)"),
    ("    @staticmethod\n", ""),
])
def test_the_stub_check_sees_each_drift(before, after):
    text = (PACKAGE / "_lirs.pyi").read_text()
    assert before in text, before
    drifted = _stub_signatures(text.replace(before, after, 1))
    assert _stub_drift(drifted, _runtime_signatures()) != []


def test_parse_example_names_and_arguments():
    # `parse_example(records, features=None)`: None decodes every feature (the core
    # decides what), and the spec's classes take tf.io's field names and defaults.
    import inspect

    import tfrecord_lirs

    for name in ("parse_example", "FixedLenFeature", "VarLenFeature", "Ragged",
                 "ParseExample"):
        assert name in tfrecord_lirs.__all__, name
    params = inspect.signature(tfrecord_lirs.parse_example).parameters
    assert [(p.name, p.default) for p in params.values()] == [
        ("records", inspect.Parameter.empty), ("features", None)]
    native = inspect.signature(_lirs.parse_examples).parameters
    assert [(p.name, p.default) for p in native.values()] == [
        ("records", inspect.Parameter.empty), ("features", None)]
    assert tfrecord_lirs.FixedLenFeature._fields == ("shape", "dtype", "default_value")
    assert tfrecord_lirs.FixedLenFeature([], "int64").default_value is None
    assert tfrecord_lirs.VarLenFeature._fields == ("dtype",)
    assert tfrecord_lirs.Ragged._fields == ("values", "row_lengths")
    assert list(inspect.signature(tfrecord_lirs.ParseExample).parameters) == ["features"]
    assert inspect.signature(tfrecord_lirs.ParseExample).parameters["features"].default is None


def test_serialize_example_names_and_arguments():
    # The inverse of parse_example: exported, one argument each, as the extension's.
    import inspect

    import tfrecord_lirs

    for name, arg in (("serialize_example", "features"), ("serialize_examples", "examples")):
        assert name in tfrecord_lirs.__all__, name
        for fn in (getattr(tfrecord_lirs, name), getattr(_lirs, name)):
            assert list(inspect.signature(fn).parameters) == [arg], fn
