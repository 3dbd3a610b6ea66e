"""A small certificate authority on the ``openssl`` command line, for the router's HTTPS and for
PostgreSQL's TLS: a CA (``ca.key`` 0600, ``ca.crt``) under one directory, and server
certificates for a name with subjectAltNames (DNS names and IP addresses), each
``<name>.crt`` + ``<name>.key`` beside it. The ansible ``shardlog`` role runs the same openssl
commands (ansible/roles/shardlog/tasks/tls.yml).

Idempotent: a CA that exists is kept; a server certificate is kept while this CA signed it, its
key matches, it covers every asked-for name and it is valid for at least ``RENEW_BEFORE_DAYS``;
otherwise it is issued anew. EC P-256 keys throughout."""

from __future__ import annotations

import ipaddress
import os
import secrets
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from services.process import OsUser, ServiceError

CA_DAYS = 3650
SERVER_DAYS = 825
RENEW_BEFORE_DAYS = 30
CA_SUBJECT = "/CN=shardlog CA"
Outcome = Literal["created", "reused"]


@dataclass(frozen=True)
class ServerCertificate:
    cert: Path
    key: Path
    outcome: Outcome


def _openssl(*args: str | Path, stdin: str | None = None) -> str:
    try:
        result = subprocess.run(
            ["openssl", *(os.fspath(a) for a in args)],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except FileNotFoundError:
        raise ServiceError("openssl not found: install the openssl package") from None
    if result.returncode != 0:
        raise ServiceError(f"openssl {args[0]} failed: {result.stderr.strip()}")
    return result.stdout


def subject_alt_names(names: Sequence[str]) -> list[str]:
    """``DNS:x`` / ``IP:y`` entries for host names and addresses, duplicates dropped."""
    entries: list[str] = []
    for name in names:
        try:
            entry = f"IP:{ipaddress.ip_address(name)}"
        except ValueError:
            if not name or any(c in name for c in ",:= \t\n"):
                raise ValueError(f"{name!r} is neither a host name nor an IP address") from None
            entry = f"DNS:{name.lower()}"
        if entry not in entries:
            entries.append(entry)
    return entries


def certificate_names(cert: Path) -> set[str]:
    """The subjectAltName entries of a certificate, as ``DNS:x`` / ``IP:y``."""
    text = _openssl("x509", "-in", cert, "-noout", "-ext", "subjectAltName")
    lines = text.splitlines()[1:]  # after "X509v3 Subject Alternative Name:"
    found = set()
    for item in ",".join(lines).split(","):
        kind, _, value = item.strip().partition(":")
        if kind == "DNS":
            found.add(f"DNS:{value.lower()}")
        elif kind == "IP Address":
            found.add(f"IP:{ipaddress.ip_address(value)}")
    return found


def _new_key(path: Path) -> None:
    """An EC P-256 key written 0600 from the start (never readable by others, even briefly)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    os.chmod(path, 0o600)


class CertificateAuthority:
    def __init__(self, directory: Path) -> None:
        self.directory = directory.absolute()

    @property
    def cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def key(self) -> Path:
        return self.directory / "ca.key"

    def ensure(self) -> Outcome:
        """The CA, made when missing. A CA whose key or certificate is gone is an error, not a
        new CA: every certificate it signed would stop being trusted."""
        if self.cert.exists() and self.key.exists():
            return "reused"
        if self.cert.exists() or self.key.exists():
            raise ServiceError(
                f"{self.directory} holds only half of a CA (ca.crt and ca.key go together); "
                "restore the missing file, or remove both to start a new CA"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o755)  # noqa: S103 - servers of another user read certificates here
        _new_key(self.key)
        _openssl(
            "req", "-x509", "-new", "-key", self.key, "-sha256", "-days", str(CA_DAYS),
            "-subj", CA_SUBJECT,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", self.cert,
        )  # fmt: skip
        return "created"

    def _reusable(self, cert: Path, key: Path, wanted: set[str]) -> bool:
        if not (cert.exists() and key.exists()):
            return False
        try:
            _openssl("verify", "-CAfile", self.cert, cert)
            _openssl("x509", "-in", cert, "-noout", "-checkend", str(RENEW_BEFORE_DAYS * 86400))
            same_key = _openssl("pkey", "-in", key, "-pubout") == _openssl(
                "x509", "-in", cert, "-noout", "-pubkey"
            )
            return same_key and wanted <= certificate_names(cert)
        except (ServiceError, ValueError):
            return False

    def issue(
        self, name: str, hosts: Sequence[str], owner: OsUser | None = None
    ) -> ServerCertificate:
        """``<name>.crt`` and ``<name>.key`` for ``hosts`` (names and addresses), reused when
        still good. ``owner``: who gets the key (PostgreSQL insists its key is its own, 0600)."""
        if not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"{name!r} is not a certificate name (letters, digits, - and _)")
        sans = subject_alt_names(hosts)
        if not sans:
            raise ValueError("a server certificate needs at least one host name or address")
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        outcome: Outcome = "reused"
        if not self._reusable(cert, key, set(sans)):
            self._sign(name, sans, cert, key)
            outcome = "created"
        if owner is not None:
            os.chown(key, owner.uid, owner.gid)
        return ServerCertificate(cert, key, outcome)

    def _sign(self, name: str, sans: list[str], cert: Path, key: Path) -> None:
        _new_key(key)
        extensions = "\n".join(
            [
                "basicConstraints = critical, CA:FALSE",
                "keyUsage = critical, digitalSignature",
                "extendedKeyUsage = serverAuth, clientAuth",
                "subjectKeyIdentifier = hash",
                "authorityKeyIdentifier = keyid, issuer",
                f"subjectAltName = {', '.join(sans)}",
            ]
        )
        with tempfile.TemporaryDirectory(prefix="shardlog-tls-") as scratch:
            csr = Path(scratch) / "server.csr"
            extfile = Path(scratch) / "server.ext"
            extfile.write_text(extensions + "\n")
            _openssl("req", "-new", "-key", key, "-subj", f"/CN={name}", "-out", csr)
            _openssl(
                "x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key,
                "-set_serial", f"0x{secrets.token_hex(16)}", "-days", str(SERVER_DAYS),
                "-sha256", "-extfile", extfile, "-out", cert,
            )  # fmt: skip
        os.chmod(cert, 0o644)
