"""The status page at / of the HTTP endpoint, loaded in a real headless
browser (Debian's chromium): after Proton publishes to two queues, the page
(its JavaScript polling the management API) shows both with their depths,
and the node as metadata leader. Then a consumer takes the messages and a
second load shows the new depth: the page reads live data, not a snapshot
baked into the HTML."""

import re
import shutil
import subprocess
import urllib.request

import pytest

from cluster import free_ports
from helpers import connection, receive_all, send_all

CHROMIUM = shutil.which("chromium")


def load_page(url, tmp_path):
    """The DOM of `url` after the page's scripts ran (virtual time lets its
    2 s refresh loop run without waiting for it)."""
    result = subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--virtual-time-budget=5000", "--dump-dom", url,
        ],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def row_of(dom, address):
    match = re.search(rf'<tr data-address="{re.escape(address)}">(.*?)</tr>', dom)
    assert match, f"no row for {address} in the page:\n{dom[:3000]}"
    return match.group(1)


def field(row, name):
    match = re.search(rf'data-field="{name}">([^<]*)<', row)
    assert match, f"no {name} in {row}"
    return match.group(1)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test-deps.sh installs it)")
def test_the_status_page_shows_queues_and_depths_in_a_browser(start_broker, tmp_path):
    (http_port,) = free_ports(1)
    broker = start_broker("--http-listen", f"127.0.0.1:{http_port}")
    page = f"http://127.0.0.1:{http_port}/"

    # The page is served as HTML with its script inline.
    with urllib.request.urlopen(page, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/html")
        assert b"/api/queues" in response.read()

    with connection(broker.url) as conn:
        send_all(conn, "/queues/page-a", [f"a-{i}" for i in range(7)])
        send_all(conn, "/queues/page-b", ["b-0", "b-1"])

    dom = load_page(page, tmp_path)
    assert 'data-loaded="true"' in dom, dom[:3000]
    assert field(row_of(dom, "/queues/page-a"), "ready") == "7"
    assert field(row_of(dom, "/queues/page-b"), "ready") == "2"
    assert "metadata leader" in dom

    with connection(broker.url) as conn:
        receive_all(conn.create_receiver("/queues/page-a", credit=7), 7, accept=True)
    dom = load_page(page, tmp_path)
    assert field(row_of(dom, "/queues/page-a"), "ready") == "0"
    assert field(row_of(dom, "/queues/page-b"), "ready") == "2"
