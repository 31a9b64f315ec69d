"""TensorFlow's real gs:// client against a GCS emulator, all on loopback.

`run_with_gcs(workdir, objects, code)` runs the Python `code` in a fresh process
inside a private network and mount namespace (`unshare -nm`, made here; needs
root or CAP_SYS_ADMIN) where:

* `gcp-storage-emulator` (PyPI) serves bucket `BUCKET` from memory on
  127.0.0.1:9023, holding `objects` (uploaded with simple media uploads: the
  emulator does not finish TensorFlow's own resumable uploads);
* a TLS front (Python's ssl module, a self-signed certificate made with the
  openssl command) listens on 127.0.0.1:443 and forwards to it;
* a bind-mounted /etc/hosts, seen only in the namespace, maps
  storage.googleapis.com and www.googleapis.com to 127.0.0.1;
* `code` runs with CURL_CA_BUNDLE (the certificate), GOOGLE_AUTH_TOKEN_FOR_TESTING
  and NO_GCE_CHECK set, so TensorFlow's GCS file system talks TLS to the emulator
  and never looks for credentials or a metadata server.

Nothing leaves loopback: the namespace has no other interface. Everything is
bounded: the whole run has a timeout, after which its process group is killed;
the emulator and the TLS front live in the namespace's first process and end with
it. `latency` optionally delays each object read (GET of object media) by a
lognormal draw keyed on the read (tests/latency.py: a hash of the seed, the object
and the byte range, so a run repeats whatever order requests arrive in), to model
remote storage (the emulator is made multi-threaded here so delayed requests
overlap, as on real storage).

A snippet can also hold one read on purpose, to make it finish after others:
`GET {STRAGGLER_URL}/hold?object=NAME&offset=N` (plain HTTP, no proxy) arms a hold
on every read of NAME covering byte N, `GET {STRAGGLER_URL}/release` lets them go
and answers {"held": reads held, "timed_out": bool} as JSON.

This file is also the program run inside the namespace (`python gcs_emulator.py
inner WORKDIR`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import KeyedLatency, Straggler  # noqa: E402
from namespace_run import run_in_namespace  # noqa: E402

BUCKET = "bkt"
EMULATOR_PORT = 9023
# The emulator's control of held reads (see the module docs), as snippets reach it.
STRAGGLER_URL = f"http://127.0.0.1:{EMULATOR_PORT}/_latency"
HOSTS = ("storage.googleapis.com", "www.googleapis.com")


class GcsRunError(AssertionError):
    """The snippet failed (or timed out); the message carries its output."""


def namespace_unavailable() -> str | None:
    """Why a private network+mount namespace cannot be made here, or None."""
    if shutil.which("unshare") is None:
        return "the unshare command is missing"
    probe = subprocess.run(["unshare", "-nm", "true"], capture_output=True, text=True,
                           timeout=30)
    if probe.returncode != 0:
        return f"unshare -nm failed: {probe.stderr.strip()}"
    return None


def require_namespace() -> None:
    """Skips the calling pytest test where no private namespace can be made."""
    import pytest

    why = namespace_unavailable()
    if why:
        pytest.skip(f"no private network namespace for the GCS emulator: {why}")


def make_certificate(directory: Path) -> Path:
    """A self-signed certificate for HOSTS; returns the PEM holding cert and key."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    san = ",".join(f"DNS:{h}" for h in HOSTS)
    # An EC key: its TLS handshakes cost the front a fraction of an RSA key's, and
    # TensorFlow's client makes a new connection for every request.
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={HOSTS[0]}",
                    "-addext", f"subjectAltName={san}"],
                   check=True, capture_output=True, timeout=60)
    return cert


def run_with_gcs(workdir: Path, objects: dict[str, Path | bytes], code: str, *,
                 latency: dict | None = None, timeout: float = 600,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs `code` (Python source) against gs://BUCKET holding `objects` (name ->
    local file or bytes). Returns the finished process (stdout/stderr as text);
    raises GcsRunError if it failed or did not finish within `timeout` seconds.

    `latency`: {"median_ms": m, "sigma": s, "seed": k} delays every object read
    by a lognormal draw (median m ms, log-space sigma s; sigma 0: m ms each) keyed on
    the read's object and byte range. `env`: more variables for the snippet.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cert = make_certificate(workdir)
    config = {"cert": str(cert), "key": str(workdir / "key.pem"), "latency": latency,
              "env": env or {}}
    return run_in_namespace(__file__, "-nm", workdir, objects, code, config, timeout,
                            GcsRunError)


# ----------------------------------------------------------------------------------
# Inside the namespace.

def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _tls_front(cert: str, key: str, stop: threading.Event) -> socket.socket:
    """Listens on 127.0.0.1:443 with TLS, forwarding each connection to the emulator."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 443), backlog=256)

    def serve_one(raw: socket.socket) -> None:
        try:
            client = context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        backend = socket.create_connection(("127.0.0.1", EMULATOR_PORT))
        back = threading.Thread(target=_pump, args=(backend, client), daemon=True)
        back.start()
        _pump(client, backend)
        back.join()
        client.close()
        backend.close()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(raw,), daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()
    return listener


def _serve_object_validators() -> None:
    """Object downloads answer with ETag and Last-Modified, as GCS does (object_store's
    GCS client requires both; the emulator sends neither). Patched before the
    emulator's router takes its reference to the handler."""
    import email.utils
    from datetime import datetime

    from gcp_storage_emulator.handlers import objects

    download = objects.download

    def download_with_validators(request, response, storage, *args, **kwargs):
        download(request, response, storage, *args, **kwargs)
        if response.status.value in (200, 206):
            obj = storage.get_file_obj(request.params["bucket_name"],
                                       request.params["object_id"])
            updated = datetime.strptime(obj["updated"], "%Y-%m-%dT%H:%M:%S.%f%z")
            response["ETag"] = f'"{obj.get("etag") or obj.get("md5Hash")}"'
            response["Last-Modified"] = email.utils.format_datetime(updated, usegmt=True)

    objects.download = download_with_validators


class _HeadersOnly:
    """A response stream that passes the status line and headers (one write, by
    http.server's end_headers) and drops the body."""

    def __init__(self, stream):
        self._stream = stream
        self._headers_sent = False

    def write(self, data):
        if self._headers_sent:
            return len(data)
        self._headers_sent = True
        return self._stream.write(data)

    def flush(self):
        self._stream.flush()


def _head_as_get(self):
    """HEAD of an object (object_store's GCS client stats objects so; the emulator
    serves no HEAD): the GET's status and headers, without its body."""
    from gcp_storage_emulator import server as emulator

    stream = self.wfile
    self.wfile = _HeadersOnly(stream)
    try:
        emulator.Router(self).handle(emulator.GET)
    finally:
        self.wfile = stream


def _control(handler, straggler: Straggler) -> None:
    """Answers a snippet's GET {STRAGGLER_URL}/hold or /release."""
    url = urllib.parse.urlsplit(handler.path)
    query = urllib.parse.parse_qs(url.query)
    if url.path == "/_latency/hold":
        straggler.arm(query["object"][0], int(query["offset"][0]))
        status, body = 200, b"{}"
    elif url.path == "/_latency/release":
        held = straggler.release()
        status, body = 200, json.dumps({"held": held,
                                        "timed_out": straggler.timed_out}).encode()
    else:
        status, body = 404, b"{}"
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _start_emulator(latency: dict | None):
    """The emulator in this process, threaded (delayed reads overlap), in memory."""
    import http.server
    import logging

    # The emulator serves one request at a time (http.server.HTTPServer); remote
    # storage serves many, which is what parallel reads are for.
    http.server.HTTPServer = http.server.ThreadingHTTPServer
    _serve_object_validators()
    from gcp_storage_emulator import server as emulator

    emulator.RequestHandler.do_HEAD = _head_as_get

    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
    model = (KeyedLatency(latency["median_ms"], latency.get("sigma", 0.0),
                          latency.get("seed", 0)) if latency else None)
    straggler = Straggler()
    handler_get = emulator.RequestHandler.do_GET

    def delayed_get(self):
        path = self.path
        if path.startswith("/_latency/"):
            return _control(self, straggler)
        # Object media reads only (GET /BUCKET/NAME or ?alt=media); metadata
        # requests (stat) are not delayed.
        if path.startswith(f"/{BUCKET}/") or "alt=media" in path:
            obj = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
            byte_range = self.headers.get("Range")
            straggler.wait_if_held(obj, byte_range)
            if model:
                time.sleep(model.delay(obj, byte_range))
        return handler_get(self)

    emulator.RequestHandler.do_GET = delayed_get
    server = emulator.Server("127.0.0.1", EMULATOR_PORT, in_memory=True,
                             default_bucket=BUCKET)
    server.start()
    return server


def _upload(name: str, local: str) -> None:
    url = (f"http://127.0.0.1:{EMULATOR_PORT}/upload/storage/v1/b/{BUCKET}/o?"
           + urllib.parse.urlencode({"uploadType": "media", "name": name}))
    data = Path(local).read_bytes()
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request, timeout=60) as response:
        if response.status != 200:
            raise RuntimeError(f"upload of {name}: HTTP {response.status}")


def _inner(workdir: Path) -> int:
    config = json.loads((workdir / "config.json").read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
    hosts = workdir / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {h}\n" for h in HOSTS))
    # Only this mount namespace sees it (unshare makes mounts private).
    subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True, timeout=30)
    stop = threading.Event()
    server = _start_emulator(config["latency"])
    listener = _tls_front(config["cert"], config["key"], stop)
    try:
        for name, local in config["objects"].items():
            _upload(name, local)
        env = dict(os.environ)
        env.update(CURL_CA_BUNDLE=config["cert"], GOOGLE_AUTH_TOKEN_FOR_TESTING="dummy",
                   NO_GCE_CHECK="true", TF_CPP_MIN_LOG_LEVEL="2")
        env.update(config["env"])
        snippet = subprocess.run([sys.executable, str(workdir / "snippet.py")], env=env,
                                 timeout=config["timeout"])
        return snippet.returncode
    finally:
        stop.set()
        listener.close()
        server.stop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "inner":
        sys.exit(_inner(Path(sys.argv[2])))
    sys.exit("usage: gcs_emulator.py inner WORKDIR (run by run_with_gcs)")
