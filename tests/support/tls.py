"""Self-signed certificates for the tests' TLS servers (the SMTP server's implicit TLS and
STARTTLS), made with the openssl command line, valid for 127.0.0.1 and localhost: a real
certificate a real client verifies, trusted only where a test names it as the authority."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificate:
    cert: Path  # PEM; self-signed, so also the authority a client trusts to accept it
    key: Path


def self_signed(folder: Path, name: str = "smtp") -> Certificate:
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return Certificate(cert, key)
