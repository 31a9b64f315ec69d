"""The object_store S3 client (tfrecord_lirs without TensorFlow) against a real S3
server, moto's server mode (PyPI `moto[server]`), all on loopback.

`run_with_s3(workdir, objects, code)` runs the Python `code` in a fresh process inside
a private network namespace (`unshare -n`, made here; needs root or CAP_SYS_ADMIN)
where moto's S3 server listens on 127.0.0.1:PORT and bucket `BUCKET` holds `objects`
(uploaded with boto3, a client independent of the one under test). The code runs with
AWS_ENDPOINT pointing there, AWS_ALLOW_HTTP, and test credentials; `env` adds or
overrides variables (e.g. wrong credentials), or removes those it maps to None.

`faults`: {"auth_after": n} makes the server check credentials after its first n
requests; {"latency_ms": m, "seed": k} delays every object GET by a lognormal draw of
median m ms (log-space sigma `latency_sigma`, default 0.8; 0: m ms each), keyed on the
GET's object and byte range (tests/latency.py: a run repeats whatever order requests
arrive in); {"fail_gets": n} answers the
first n object GETs with 503 (the client's retries must absorb them); {"count_gets":
true} counts the object GETs per object path, which `GET $AWS_ENDPOINT/_gets` answers
as JSON ({"/BUCKET/name": n}); {"netem_delay_ms":
d} delays every packet on the namespace's loopback by d ms in the kernel (`tc qdisc ...
netem`: a round trip of 2d), for which `netem_unavailable()` says whether it can.

Nothing leaves loopback: the namespace has no other interface. The whole run has a
timeout, after which its process group is killed; the server lives in the namespace's
first process and ends with it.

This file is also the program run inside the namespace (`python s3_server.py inner
WORKDIR`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import KeyedLatency  # noqa: E402
from namespace_run import run_in_namespace  # noqa: E402

BUCKET = "bkt"
PORT = 9024
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1"}


class S3RunError(AssertionError):
    """The snippet failed (or timed out); the message carries its output."""


def netem_unavailable(delay_ms: int = 25) -> str | None:
    """Why the kernel's netem delay cannot be put on a private namespace's loopback
    here (no unshare, no tc, or no sch_netem in this kernel), or None."""
    import shutil

    for tool in ("unshare", "tc", "ip"):
        if shutil.which(tool) is None:
            return f"the {tool} command is missing (apt-get install iproute2 util-linux)"
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c",
         f"ip link set lo up && tc qdisc add dev lo root netem delay {delay_ms}ms"],
        capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return (f"tc qdisc add dev lo root netem failed in a private network namespace: "
                f"{probe.stderr.strip() or probe.returncode} (this kernel has no sch_netem, "
                f"or no CAP_NET_ADMIN)")
    return None


def run_with_s3(workdir, objects, code, *, faults=None, timeout=600, env=None):
    """Runs `code` against s3://BUCKET holding `objects` (name -> local file or bytes);
    returns the finished process; raises S3RunError if it failed or timed out."""
    config = {"faults": faults or {}, "env": env or {}}
    return run_in_namespace(__file__, "-n", workdir, objects, code, config, timeout, S3RunError)


# ----------------------------------------------------------------------------------
# Inside the namespace.

def _faulty_app(app, faults):
    """Wraps moto's WSGI app: delays and 5xx answers of object GETs."""
    model = KeyedLatency(faults.get("latency_ms", 0), faults.get("latency_sigma", 0.8),
                         faults.get("seed", 0))
    lock = threading.Lock()
    state = {"fail_gets": int(faults.get("fail_gets", 0))}
    gets = {}

    def wrapped(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if faults.get("count_gets") and path == "/_gets":
            with lock:
                body = json.dumps(gets).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        is_object_get = (environ.get("REQUEST_METHOD") == "GET"
                         and path.count("/") >= 2 and not environ.get("QUERY_STRING"))
        if is_object_get:
            with lock:
                gets[path] = gets.get(path, 0) + 1
                failing = state["fail_gets"] > 0
                if failing:
                    state["fail_gets"] -= 1
            delay = model.delay(path, environ.get("HTTP_RANGE"))
            if delay:
                threading.Event().wait(delay)
            if failing:
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"injected 503"]
        return app(environ, start_response)

    return wrapped


def _inner(workdir: Path) -> int:
    config = json.loads((workdir / "config.json").read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
    if config["faults"].get("netem_delay_ms"):
        # Real kernel latency on every packet of the namespace's loopback.
        subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                        f"{config['faults']['netem_delay_ms']}ms"], check=True, timeout=30)
    os.environ.update(CREDENTIALS)
    if config["faults"].get("auth_after") is not None:
        # moto checks signatures against its IAM after this many requests (the
        # bucket and the uploads): later requests with unknown keys get 403.
        os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = str(config["faults"]["auth_after"])
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    import boto3

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=PORT, verbose=False)
    server.start()
    faults = config["faults"]
    front = None
    endpoint = f"http://127.0.0.1:{PORT}"
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket=BUCKET)
        for name, local in config["objects"].items():
            s3.upload_file(local, BUCKET, name)
        if set(faults) - {"auth_after", "netem_delay_ms"}:
            # A second port serves the same S3 backend through the fault wrapper: moto's
            # S3 app itself, the one its dispatcher picks for every request here, without
            # the dispatcher (which matches each request's host against every service's
            # URL patterns under one lock) or werkzeug's log line per request (to stderr,
            # under the logging lock). Measured (py-spy, os.times) on 2 shared cores, 32
            # connections of ranged GETs: 2.3-2.5 ms of server CPU per GET through both,
            # 1.7-1.9 ms without.
            from moto.moto_server.werkzeug_app import create_backend_app

            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            front = make_server("127.0.0.1", PORT + 1,
                                _faulty_app(create_backend_app("s3"), faults), threaded=True)
            threading.Thread(target=front.serve_forever, daemon=True).start()
            endpoint = f"http://127.0.0.1:{PORT + 1}"
        env = dict(os.environ)
        env.update(AWS_ENDPOINT=endpoint, AWS_ALLOW_HTTP="true")
        env.update({k: v for k, v in config["env"].items() if v is not None})
        for name in [k for k, v in config["env"].items() if v is None]:
            env.pop(name, None)
        snippet = subprocess.run([sys.executable, str(workdir / "snippet.py")], env=env,
                                 timeout=config["timeout"])
        return snippet.returncode
    finally:
        if front is not None:
            front.shutdown()
        server.stop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "inner":
        sys.exit(_inner(Path(sys.argv[2])))
    sys.exit("usage: s3_server.py inner WORKDIR (run by run_with_s3)")
