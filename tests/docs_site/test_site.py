"""The built site (`make docs`: site/) opened in headless Chromium: the home page and
one page per section render with their title and heading, every image loads, and the
browser logs no error. A screenshot of each goes to site/screenshots/.

Run by `make docs` in .venv-docs (selenium, Debian's chromium and chromium-driver), with
--noconftest: it needs nothing of the other suites' fixtures."""

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

# Only .venv-docs has selenium: elsewhere (a bare `pytest tests`) this module is skipped.
pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

SITE = Path(__file__).resolve().parents[2] / "site"
SHOTS = SITE / "screenshots"

# (path under site/, words of the title, the page's first heading)
PAGES = [
    ("", "tfrecord-lirs", "tfrecord-lirs"),
    ("getting-started/tf-data/", "tf.data and Keras", "tf.data and Keras"),
    ("getting-started/pytorch/", "PyTorch", "PyTorch"),
    ("how-to/object-storage/", "Object storage", "Object storage and cache_dir"),
    ("concepts/", "Concepts", "Concepts"),
    ("FORMAT/", "Formats and orders", "tfrecord-lirs file formats"),
    ("reference/sources/", "Random access and orders", "Random access and orders (no TensorFlow)"),
    ("benchmarks/", "Benchmarks", "Benchmarks"),
    ("development/", "Development", "Development"),
    ("rust/tfrecord_lirs/index.html", "tfrecord_lirs", "tfrecord_lirs"),
]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base_url():
    assert (SITE / "index.html").exists(), "build the site first: make docs"
    handler = functools.partial(_Quiet, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium")
    chromedriver = shutil.which("chromedriver")
    assert chromium and chromedriver, "needs Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    SHOTS.mkdir(exist_ok=True)
    yield driver
    driver.quit()


@pytest.mark.parametrize("path,title,heading", PAGES, ids=[p[0] or "home" for p in PAGES])
def test_page_renders(browser, base_url, path, title, heading):
    browser.get_log("browser")  # only this page's messages below
    browser.get(base_url + path)
    browser.execute_script("return document.readyState")
    assert title in browser.title, browser.title
    h1 = browser.find_element(By.TAG_NAME, "h1").text
    assert heading in h1, h1
    broken = browser.execute_script(
        "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
        ".map(i => i.src)")
    assert not broken, broken
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    name = (path.strip("/").replace("/", "_").replace(".html", "") or "home") + ".png"
    assert browser.save_screenshot(str(SHOTS / name))
    assert os.path.getsize(SHOTS / name) > 1000
