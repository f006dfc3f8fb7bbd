"""HTTPS for a room, for real: ``make hub-cert``'s certificate (this machine's names and addresses), a hub with
``HUB_HTTPS=1`` on 127.0.0.1 that prints the certificate's fingerprint, its login page loaded over
``https://127.0.0.1`` trusting only that certificate, and no plain HTTP on the port."""
from __future__ import annotations

import http.client
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ampkit.classroom import tls
from conftest import ROOT, LoopbackHub


@pytest.fixture(scope="module")
def https_hub():
    state = Path(tempfile.mkdtemp(prefix="ampkit-hubtest-tls-"))
    out = subprocess.run([sys.executable, "-m", "ampkit.classroom.tls", "cert", "--state", str(state), "--names",
                          "hub.room.example,10.11.12.13"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    h = LoopbackHub({"AMPKIT_HUB_HTTPS": "1"}, https=True, cafile=str(tls.cert_files(state)[0]), state=state)
    try:
        h.wait_up()
        h.cert_output = out.stdout
        yield h
    finally:
        h.stop()
        import shutil

        shutil.rmtree(state, ignore_errors=True)


def test_the_fingerprint_printed_is_the_files(https_hub):
    cert = tls.cert_files(https_hub.state)[0]
    openssl = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256"],
                             capture_output=True, text=True, check=True).stdout
    from_openssl = openssl.strip().split("=", 1)[1]
    assert re.fullmatch(r"([0-9A-F]{2}:){31}[0-9A-F]{2}", from_openssl)
    assert f"SHA-256 fingerprint: {from_openssl}" in https_hub.cert_output       # make hub-cert
    deadline = time.monotonic() + 10
    while f"SHA-256 fingerprint: {from_openssl}" not in https_hub.log() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert f"SHA-256 fingerprint: {from_openssl}" in https_hub.log()            # and the hub at its start
    assert stat_mode(tls.cert_files(https_hub.state)[1]) == 0o600
    assert stat_mode(cert.parent) == 0o700


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_login_page_over_https_with_that_certificate(https_hub):
    status, body = https_hub.request("GET", "/hub/login", token=False)
    assert status == 200 and b'name="password"' in body
    assert https_hub.url.startswith("https://127.0.0.1:")
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):   # the system's CAs don't know it
        urllib.request.urlopen(https_hub.url + "/hub/login", timeout=10, context=ssl.create_default_context())


def test_no_plain_http_on_the_port(https_hub):
    conn = http.client.HTTPConnection("127.0.0.1", https_hub.port, timeout=10)
    try:
        conn.request("GET", "/hub/login")
        response = conn.getresponse()
        status, body = response.status, response.read()
    except (http.client.HTTPException, ConnectionError, OSError):
        return                                      # the TLS server drops a plain-HTTP request
    finally:
        conn.close()
    assert status >= 400 and b"password" not in body, (status, body[:200])
