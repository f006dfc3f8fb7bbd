"""HTTPS for a room's hub without a certificate authority: ``make hub-cert`` makes a self-signed certificate for
this machine's names and addresses (the ``openssl`` command), ``make hub HUB_HTTPS=1`` serves it, and the hub
prints its SHA-256 fingerprint, which each learner compares with the one their browser shows before typing the
room password (hub/README.md, "HTTPS for the room").

Standard library only; the certificate is made by the ``openssl`` program (``openssl req -x509``).

>>> san_field(["hub", "localhost"], ["127.0.0.1", "::1"])
'DNS:hub,DNS:localhost,IP:127.0.0.1,IP:::1'
"""
from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import socket
import ssl
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: The certificate's folder in the hub's state folder (mode 700), and its two files (the key mode 600).
TLS_DIR, CERT_NAME, KEY_NAME = "tls", "hub.crt", "hub.key"
DEFAULT_DAYS = 90
_DNS = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                  r"[A-Za-z0-9])?)*$")


def cert_files(state_dir: str | os.PathLike) -> tuple[Path, Path]:
    tls_dir = Path(state_dir) / TLS_DIR
    return tls_dir / CERT_NAME, tls_dir / KEY_NAME


def hub_cert_files(state_dir: str | os.PathLike, given: tuple[str, str] = ("", "")) -> tuple[str, str]:
    """``HUB_HTTPS=1``: the certificate and key of ``make hub-cert``; a clear error when they are missing or when
    ``HUB_SSL_CERT``/``HUB_SSL_KEY`` are given as well."""
    if any(given):
        raise ValueError("HUB_HTTPS=1 serves the certificate of make hub-cert; HUB_SSL_CERT/HUB_SSL_KEY serve your "
                         "own: give one or the other, not both")
    cert, key = cert_files(state_dir)
    if not (cert.is_file() and key.is_file()):
        raise ValueError(f"HUB_HTTPS=1: no certificate in {cert.parent}: make one first with  make hub-cert  "
                         "(hub/README.md, 'HTTPS for the room')")
    return str(cert), str(key)


def machine_names() -> tuple[list[str], list[str]]:
    """This machine's names (host name, full name, ``NAME.local`` for mDNS, ``localhost``) and addresses
    (loopback, the address of the default route, those the host name resolves to). No packet is sent."""
    host = socket.gethostname()
    names = [host, socket.getfqdn(), f"{host.split('.')[0]}.local", "localhost"]
    addresses = ["127.0.0.1", "::1"]
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:   # a UDP "connect" picks the outgoing address of the default route; nothing is sent
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                addresses.append(s.getsockname()[0])
        except OSError:
            pass
    try:
        addresses += [info[4][0] for info in socket.getaddrinfo(host, None) if isinstance(info[4][0], str)]
    except OSError:
        pass
    return _unique(names), _unique(a.split("%")[0] for a in addresses)


def _unique(items) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def split_names(extra: list[str]) -> tuple[list[str], list[str]]:
    """``HUB_CERT_NAMES`` entries as (DNS names, IP addresses); anything else raises, naming what is valid."""
    names, addresses = [], []
    for item in extra:
        try:
            addresses.append(str(ipaddress.ip_address(item)))
        except ValueError:
            if not _DNS.match(item):
                raise ValueError(f"HUB_CERT_NAMES: {item!r} is neither an IP address (e.g. 192.168.1.20) nor a host "
                                 "name (letters, digits, '-' and dots, e.g. hub.school.example)") from None
            names.append(item)
    return names, addresses


def san_field(names: list[str], addresses: list[str]) -> str:
    """The ``subjectAltName`` value: every name as DNS, every address as IP (browsers check only these)."""
    return ",".join([f"DNS:{n}" for n in _unique(names)] + [f"IP:{a}" for a in _unique(addresses)])


def openssl_argv(cert: Path, key: Path, names: list[str], addresses: list[str], days: int = DEFAULT_DAYS) -> list[str]:
    """``openssl req -x509``: a new P-256 key (no passphrase: the hub starts unattended) and a self-signed
    certificate for ``names`` and ``addresses``, valid ``days``."""
    return ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", str(days), "-subj", f"/CN=ampkit hub {names[0]}",
            "-addext", f"subjectAltName={san_field(names, addresses)}",
            "-addext", "extendedKeyUsage=serverAuth"]


def fingerprint(cert: str | os.PathLike) -> str:
    """The certificate's SHA-256 fingerprint as browsers show it: 32 bytes, hex, colon-separated."""
    der = ssl.PEM_cert_to_DER_cert(Path(cert).read_text())
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def make_cert(state_dir: str | os.PathLike, extra: Sequence[str] = (), days: int = DEFAULT_DAYS,
              force: bool = False, run=subprocess.run) -> tuple[Path, bool]:
    """Make the hub's certificate (``tls/hub.crt``, key ``tls/hub.key`` mode 600, folder mode 700) for this
    machine's names and addresses plus ``extra``. An existing certificate is kept unless ``force`` (learners
    who checked its fingerprint would see a new one). Returns the certificate and whether it is new."""
    if not 1 <= days <= 825:
        raise ValueError(f"days={days}: expected 1 to 825 (browsers refuse longer-lived certificates)")
    cert, key = cert_files(state_dir)
    if cert.is_file() and key.is_file() and not force:
        return cert, False
    names, addresses = machine_names()
    more_names, more_addresses = split_names(list(extra))
    names, addresses = _unique(names + more_names), _unique(addresses + more_addresses)
    cert.parent.mkdir(parents=True, exist_ok=True)
    cert.parent.chmod(0o700)
    for path in (cert, key):
        path.unlink(missing_ok=True)
    out = run(openssl_argv(cert, key, names, addresses, days), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"openssl failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    key.chmod(0o600)
    cert.chmod(0o644)
    return cert, True


def fingerprint_notice(cert: str | os.PathLike) -> str:
    """What the hub prints at its start: the fingerprint, and how a learner checks it."""
    try:
        value = fingerprint(cert)
    except (OSError, ValueError) as exc:      # the proxy will refuse it too, with its own message
        return f"ampkit hub: HTTPS certificate {cert}: not a readable PEM certificate ({exc})"
    return (f"ampkit hub: HTTPS certificate {cert}\n"
            f"  SHA-256 fingerprint: {value}\n"
            "  Write it on the board. Learners: the browser warns that the certificate is not trusted; before you "
            "go on and type the password, open the certificate (the padlock or 'Not secure' at the left of the "
            "address bar, then the certificate viewer) and check that its SHA-256 fingerprint is this one.")


def main(argv: list[str] | None = None) -> int:
    """``python -m ampkit.classroom.tls cert [--state DIR] [--names a,b] [--days N] [--force]``: make the hub's
    certificate (or keep the one there) and print its names and fingerprint; ``fingerprint``: print it only."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.tls", description=main.__doc__)
    p.add_argument("command", choices=("cert", "fingerprint"))
    p.add_argument("--state", default=os.environ.get("AMPKIT_HUB_STATE") or ".cache/hub")
    p.add_argument("--names", default="", help="more DNS names or IP addresses, comma-separated")
    p.add_argument("--days", type=int, default=DEFAULT_DAYS)
    p.add_argument("--force", action="store_true", help="replace an existing certificate")
    a = p.parse_args(argv)
    cert, _ = cert_files(a.state)
    try:
        if a.command == "cert":
            extra = [n for n in a.names.replace(" ", ",").split(",") if n]
            cert, new = make_cert(a.state, extra, a.days, a.force)
            print(f"{'new certificate' if new else 'kept the existing certificate (FORCE=1 makes a new one)'}: "
                  f"{cert}", file=sys.stderr)
            out = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-ext", "subjectAltName",
                                  "-enddate"], capture_output=True, text=True)
            print(out.stdout.strip(), file=sys.stderr)
        elif not cert.is_file():
            raise ValueError(f"no certificate at {cert}: make hub-cert")
        print(fingerprint_notice(cert))
    except (ValueError, RuntimeError) as exc:
        print(f"make hub-cert: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
