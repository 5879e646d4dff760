"""The HTML pages a user opens, in a real headless browser (Chromium driven by Selenium): the
``report.html`` of ``report`` and of ``reproduce``, and every page of the documentation site.

Each page is served over HTTP from its folder, as a browser opens it, and must show: every image
loaded (``naturalWidth > 0``), every table rendered with rows and cells, no error in the
browser's console, and every link inside the page resolving (a ``#fragment`` to an element of
the page, a relative link to a file of the folder). Without Chromium and Selenium the tests skip,
naming what to install.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest

from tests.cli_runs import ROOT, cli_env

INSTALL = "apt-get install chromium chromium-driver (Debian) and pip install selenium"
#: What the page shows, measured in the browser after load.
PAGE_FACTS = """
const imgs = Array.from(document.images);
const tables = Array.from(document.querySelectorAll('table'));
const ids = new Set(Array.from(document.querySelectorAll('[id], a[name]')).map(e => e.id || e.getAttribute('name')));
return {
  images: imgs.length,
  broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
  tables: tables.length,
  empty_tables: tables.filter(t => t.rows.length < 2 || t.rows[1].cells.length < 1 || t.getBoundingClientRect().height <= 0).length,
  missing_fragments: Array.from(document.querySelectorAll('a[href^="#"]')).map(a => decodeURIComponent(a.getAttribute('href').slice(1)))
                       .filter(f => f && !ids.has(f)),
  relative_links: Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))
                       .filter(h => !/^([a-z]+:|#|\\/\\/)/i.test(h)),
};
"""


def _driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason=f"Selenium is not installed: {INSTALL}")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip(f"Chromium or its driver is not installed: {INSTALL}")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.webdriver.chrome.service import Service

    return webdriver.Chrome(service=Service(driver_path), options=options)


@pytest.fixture(scope="module")
def browser():
    driver = _driver()
    yield driver
    driver.quit()


@contextlib.contextmanager
def _served(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on 127.0.0.1 (a free port); its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def check_page(driver, base: str, folder: Path, page: str) -> dict:
    """Open ``page`` (relative to ``folder``, served at ``base``); assert what every page must show; its facts."""
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(base + page)
    facts = driver.execute_script(PAGE_FACTS)
    # the browser's own request for /favicon.ico is not the page's: a page without one is fine; the
    # site's theme fetches web fonts and the repository's badge from other hosts, which a machine
    # without internet cannot reach: those network failures are not the page's errors either
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "/favicon.ico " not in e["message"]
              and not (e["message"].startswith(("http://", "https://")) and not e["message"].startswith(base) and " net::ERR_" in e["message"])]
    assert errors == [], (page, errors)
    assert facts["broken_images"] == [], (page, facts["broken_images"])
    assert facts["empty_tables"] == 0, (page, facts)
    assert facts["missing_fragments"] == [], (page, facts["missing_fragments"])
    here = (folder / page).parent
    unresolved = []
    for href in facts["relative_links"]:
        path = urllib.parse.unquote(urllib.parse.urlsplit(href).path)
        if not path:
            continue
        target = (here / path).resolve()
        if not (target.is_file() or (target / "index.html").is_file()):
            unresolved.append(href)
    assert unresolved == [], (page, unresolved)
    return facts


@pytest.mark.slow
def test_the_report_page_of_a_run(browser, tmp_path_factory):
    from flamingo_sim.report import write_report
    from tests.report_runs import small_runs

    two, _ = small_runs(tmp_path_factory)
    report = write_report([two])
    with _served(report.html.parent) as base:
        facts = check_page(browser, base, report.html.parent, report.html.name)
    assert facts["images"] == len([p for paths in report.figures.values() for p in paths if p.suffix == ".png"]) > 0
    assert facts["tables"] >= 1


@pytest.mark.slow
def test_the_report_page_of_reproduce(browser, tmp_path):
    out = tmp_path / "repro"
    argv = [sys.executable, "-m", "flamingo_sim", "reproduce", "--out", str(out), "--seeds", "1", "--tasks", "openimage_mobilenet"]
    for item in ("fl.rounds=3", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=1", "data.proxy.n_clients=100"):
        argv += ["--set", item]
    done = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    with _served(out) as base:
        facts = check_page(browser, base, out, "report.html")
    assert facts["images"] >= 1 and facts["tables"] >= 3  # Tables 1-3 and Figure 6's analogue


@pytest.mark.slow
def test_every_page_of_the_documentation_site(browser, tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install 'flamingo-sim[docs]'")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, env={**cli_env(), "NO_MKDOCS_2_WARNING": "1"}, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    pages = sorted(str(p.relative_to(site)) for p in site.rglob("*.html") if p.name != "404.html")
    assert len(pages) >= 15, pages
    n_tables = n_images = 0
    with _served(site) as base:
        for page in pages:
            facts = check_page(browser, base, site, page)
            n_tables += facts["tables"]
            n_images += facts["images"]
    assert n_tables >= 10
    # every image the pages' Markdown embeds (![...](...)) is on the built site and loaded (check_page)
    embedded = sum(len(re.findall(r"!\[[^\]]*\]\(", p.read_text())) for p in (ROOT / "docs").rglob("*.md"))
    assert embedded >= 2 and n_images == embedded, (n_images, embedded)  # paper.md's attribution figure, population.md's chart
