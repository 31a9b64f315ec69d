"""The `tfrecord-lirs` CLI over s3:// (the core's Storage with its object_store client)
against a real S3 server, moto's server mode, on loopback in a private network
namespace (tests/s3_server.py): every command that reads (index, info, verify, get,
order, export) and pad gives, over s3://, exactly what it gives over the same bytes on
local disk; what it writes to s3:// (tables, padded copies) is, byte for byte, what it
writes locally (fetched back with boto3, a client independent of the one under test);
a missing object, a missing table and a damaged record are exit 1 with one `error:`
line naming the URL (and the byte).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import CLI_PATH, affine_payload, framed, require_cli, run_cli, run_ok
from gcs_emulator import require_namespace
from s3_server import BUCKET, run_with_s3

PAYLOADS = [affine_payload(i, 30 + (i * 37) % 900) for i in range(1200)]
DATA, TABLE = framed(PAYLOADS)
DAMAGED_INSTANCE = 321
S3 = f"s3://{BUCKET}"

# Each command run over s3:// inside the namespace and over the local copy outside:
# (name, arguments with {src} for the data file's location, "s3://bkt" or the local
# directory).
READS = [
    ("info", ["info", "--json", "{src}/padded.tfrecord"]),
    ("info_untabled", ["info", "{src}/untabled.tfrecord"]),
    ("verify", ["verify", "{src}/padded.tfrecord"]),
    ("verify_page", ["verify", "--page-size", "4096", "{src}/padded.tfrecord"]),
    ("get", ["get", "{src}/padded.tfrecord", "17"]),
    ("get_last", ["get", "{src}/padded.tfrecord", str(len(PAYLOADS) - 1)]),
    ("order", ["order", "{src}/padded.tfrecord", "--seed", "3"]),
    ("order_page_aware", ["order", "{src}/padded.tfrecord", "--seed", "5", "--page-aware",
                          "--num-shards", "3", "--shard-index", "1"]),
    ("export", ["export", "{src}/padded.tfrecord", "--format", "dali", "--out", "-"]),
]

SNIPPET = """
import json, os, subprocess, sys
import boto3

cli = {cli!r}
reads = {reads!r}
out = {{}}

def run(name, args):
    p = subprocess.run([cli, *args], capture_output=True, timeout=300)
    out[name] = [p.returncode, p.stdout.hex(), p.stderr.decode("utf-8", "replace")]

for name, args in reads:
    run(name, [a.format(src={s3!r}) for a in args])
# Writes to s3://: a table beside the object, a table at an explicit URL, a padded copy.
run("index", ["index", "{s3}/plain.tfrecord"])
run("index_out", ["index", "{s3}/plain.tfrecord", "--out", "{s3}/tables/plain.offsets"])
run("pad", ["pad", "{s3}/plain.tfrecord", "{s3}/out/padded.tfrecord"])
run("pad_again", ["pad", "{s3}/plain.tfrecord", "{s3}/out/padded.tfrecord"])
# Errors.
run("missing", ["get", "{s3}/none.tfrecord", "0"])
run("untabled", ["verify", "{s3}/untabled.tfrecord"])
run("damaged", ["verify", "{s3}/damaged.tfrecord"])
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT"])
def fetch(key):
    return s3.get_object(Bucket={bucket!r}, Key=key)["Body"].read().hex()
written = {{key: fetch(key) for key in ["plain.tfrecord.offsets", "tables/plain.offsets",
                                         "out/padded.tfrecord", "out/padded.tfrecord.offsets"]}}
print(json.dumps({{"out": out, "written": written}}))
"""


@pytest.fixture(scope="module")
def over_s3(tmp_path_factory):
    """The local files, and what every command gave over s3:// in the namespace."""
    require_namespace()
    require_cli()
    tmp = tmp_path_factory.mktemp("cli_s3")
    local = tmp / "local"
    local.mkdir()
    plain = local / "plain.tfrecord"
    plain.write_bytes(DATA)
    (local / "plain.tfrecord.offsets").write_bytes(TABLE)
    (local / "untabled.tfrecord").write_bytes(DATA)
    run_ok("pad", plain, local / "padded.tfrecord")
    damaged = bytearray(DATA)
    at = sum(12 + len(p) + 4 for p in PAYLOADS[:DAMAGED_INSTANCE]) + 12 + 5
    damaged[at] ^= 0x5A
    objects = {
        "plain.tfrecord": DATA,
        "padded.tfrecord": (local / "padded.tfrecord").read_bytes(),
        "padded.tfrecord.offsets": (local / "padded.tfrecord.offsets").read_bytes(),
        "untabled.tfrecord": DATA,
        "damaged.tfrecord": bytes(damaged),
        "damaged.tfrecord.offsets": TABLE,
    }
    # The remote plain file has no table yet: `index` writes it.
    code = SNIPPET.format(cli=str(CLI_PATH.resolve()), reads=READS, s3=S3, bucket=BUCKET)
    res = run_with_s3(tmp / "run", objects, code, timeout=900)
    report = json.loads(res.stdout.strip().splitlines()[-1])
    return {"local": local, "out": report["out"], "written": report["written"],
            "damaged_at": at}


def _local(over_s3, args):
    return run_cli(*[a.format(src=str(over_s3["local"])) for a in args])


@pytest.mark.parametrize("name,args", READS, ids=[r[0] for r in READS])
def test_reads_over_s3_equal_the_local_file(over_s3, name, args):
    code, stdout, stderr = over_s3["out"][name]
    assert code == 0, stderr
    assert "panicked" not in stderr, stderr
    want = _local(over_s3, args)
    assert want.returncode == 0, want.describe()
    got = bytes.fromhex(stdout)
    if name.startswith("info"):
        # The file (and table) names differ: the URL, or the local path.
        local_dir = str(over_s3["local"])
        got = got.decode().replace(S3, local_dir).encode()
    assert got == want.stdout, (got[:500], want.stdout[:500])
    assert len(got) > 0


def test_get_over_s3_is_the_payload(over_s3):
    assert bytes.fromhex(over_s3["out"]["get"][1]) == PAYLOADS[17]
    assert bytes.fromhex(over_s3["out"]["get_last"][1]) == PAYLOADS[-1]


def test_index_and_pad_write_s3_objects_like_local_files(over_s3, tmp_path):
    out, written = over_s3["out"], over_s3["written"]
    for name in ("index", "index_out", "pad"):
        assert out[name][0] == 0, out[name][2]
    assert bytes.fromhex(out["index"][1]).decode().strip() == str(len(PAYLOADS))
    assert bytes.fromhex(written["plain.tfrecord.offsets"]) == TABLE
    assert bytes.fromhex(written["tables/plain.offsets"]) == TABLE
    # The padded copy and its table, byte for byte the local pad's.
    local_out = tmp_path / "padded.tfrecord"
    run_ok("pad", over_s3["local"] / "plain.tfrecord", local_out)
    assert bytes.fromhex(written["out/padded.tfrecord"]) == local_out.read_bytes()
    assert (bytes.fromhex(written["out/padded.tfrecord.offsets"])
            == Path(str(local_out) + ".offsets").read_bytes())
    assert bytes.fromhex(out["pad"][1]) == run_ok(
        "pad", over_s3["local"] / "plain.tfrecord", tmp_path / "again.tfrecord").stdout
    # An existing output is refused as for a local file (exit 1, --force to replace).
    code, _, stderr = out["pad_again"]
    assert code == 1 and "--force" in stderr, stderr


def _error_line(result):
    code, _, stderr = result
    lines = stderr.strip("\n").split("\n")
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "panicked" not in stderr, stderr
    return lines[0]


def test_errors_over_s3_name_the_url(over_s3):
    out = over_s3["out"]
    line = _error_line(out["missing"])
    assert f"{S3}/none.tfrecord" in line, line
    line = _error_line(out["untabled"])
    assert f"{S3}/untabled.tfrecord.offsets" in line, line
    assert "tfrecord-lirs index" in line, line  # how to make the table
    line = _error_line(out["damaged"])
    assert f"{S3}/damaged.tfrecord" in line and f"instance {DAMAGED_INSTANCE}" in line, line
    # The same words as for the same damaged bytes on local disk, the path aside.
    local = over_s3["local"] / "damaged.tfrecord"
    damaged = bytearray(DATA)
    damaged[over_s3["damaged_at"]] ^= 0x5A
    local.write_bytes(bytes(damaged))
    shutil.copy(over_s3["local"] / "plain.tfrecord.offsets", str(local) + ".offsets")
    want = run_cli("verify", local)
    assert want.returncode == 1, want.describe()
    assert line == want.stderr.strip().replace(str(over_s3["local"]), S3), (line, want.stderr)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
