"""HTTPS for the room (ampkit/classroom/tls.py, make hub-cert, HUB_HTTPS=1): the certificate's names, key and
fingerprint, checked with the openssl program; the settings' errors. No hub is started here (tests/hub does)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ampkit.classroom import hub, tls

ROOT = Path(__file__).resolve().parents[1]


def _openssl(cert: Path, *args: str) -> str:
    return subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", *args], capture_output=True, text=True,
                          check=True).stdout


def test_names_split_and_san_field():
    assert tls.split_names(["hub.room.example", "10.0.0.5", "::1"]) == (["hub.room.example"], ["10.0.0.5", "::1"])
    assert tls.san_field(["a", "a"], ["10.0.0.5"]) == "DNS:a,IP:10.0.0.5"
    for bad in ("bad name", "-lead.example", "a..b"):
        with pytest.raises(ValueError, match="neither an IP address .* nor a host name"):
            tls.split_names([bad])


def test_machine_names_include_loopback_and_the_host():
    import socket

    names, addresses = tls.machine_names()
    assert socket.gethostname() in names and "localhost" in names
    assert {"127.0.0.1", "::1"} <= set(addresses)


def test_openssl_argv():
    argv = tls.openssl_argv(Path("c.crt"), Path("k.key"), ["hub"], ["10.0.0.5"], days=30)
    assert argv[:3] == ["openssl", "req", "-x509"] and "-nodes" in argv
    assert "subjectAltName=DNS:hub,IP:10.0.0.5" in argv and argv[argv.index("-days") + 1] == "30"


def test_cert_has_the_names_asked_a_private_key_and_the_printed_fingerprint(tmp_path):
    cert, new = tls.make_cert(tmp_path, ["hub.room.example", "10.11.12.13"], days=30)
    key = tls.cert_files(tmp_path)[1]
    assert new and cert == tmp_path / "tls" / "hub.crt"
    san = _openssl(cert, "-ext", "subjectAltName")
    for want in ("DNS:hub.room.example", "IP Address:10.11.12.13", "IP Address:127.0.0.1", "DNS:localhost"):
        assert want in san, san
    assert key.stat().st_mode & 0o777 == 0o600 and cert.parent.stat().st_mode & 0o777 == 0o700
    from_openssl = _openssl(cert, "-fingerprint", "-sha256").strip().split("=", 1)[1]
    assert tls.fingerprint(cert) == from_openssl
    assert f"SHA-256 fingerprint: {from_openssl}" in tls.fingerprint_notice(cert)
    assert "certificate viewer" in tls.fingerprint_notice(cert)
    assert subprocess.run(["openssl", "pkey", "-in", str(key), "-noout"], capture_output=True).returncode == 0
    assert tls.make_cert(tmp_path) == (cert, False) and tls.fingerprint(cert) == from_openssl   # kept
    tls.make_cert(tmp_path, force=True)
    assert tls.fingerprint(cert) != from_openssl                                                # replaced


def test_cert_cli_prints_the_fingerprint(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ampkit.classroom.tls", "cert", "--state", str(tmp_path),
                          "--names", "hub.room.example"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"SHA-256 fingerprint: {tls.fingerprint(tls.cert_files(tmp_path)[0])}" in out.stdout
    assert "DNS:hub.room.example" in out.stderr
    bad = subprocess.run([sys.executable, "-m", "ampkit.classroom.tls", "cert", "--state", str(tmp_path / "x"),
                          "--names", "hub!room"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "neither an IP address" in bad.stderr and "Traceback" not in bad.stderr


def test_bad_days_and_unreadable_certificates(tmp_path):
    with pytest.raises(ValueError, match="1 to 825"):
        tls.make_cert(tmp_path, days=0)
    (tmp_path / "junk.crt").write_text("not a certificate")
    assert "not a readable PEM certificate" in tls.fingerprint_notice(tmp_path / "junk.crt")


def test_https_setting_uses_make_hub_certs_files(tmp_path):
    state = tmp_path / "state"
    with pytest.raises(ValueError, match="make hub-cert"):
        hub.settings_from_env({"AMPKIT_HUB_HTTPS": "1", "AMPKIT_HUB_STATE": str(state)}, ROOT)
    tls.make_cert(state)
    s = hub.settings_from_env({"AMPKIT_HUB_HTTPS": "1", "AMPKIT_HUB_STATE": str(state)}, ROOT)
    assert s.bind_url == "https://127.0.0.1:8000/"
    assert (s.ssl_cert, s.ssl_key) == tuple(str(p) for p in tls.cert_files(state))
    with pytest.raises(ValueError, match="not both"):
        hub.settings_from_env({"AMPKIT_HUB_HTTPS": "1", "AMPKIT_HUB_STATE": str(state),
                               "AMPKIT_HUB_SSL_CERT": s.ssl_cert, "AMPKIT_HUB_SSL_KEY": s.ssl_key}, ROOT)
