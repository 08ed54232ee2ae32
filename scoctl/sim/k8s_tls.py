"""TLS for the simulated Kubernetes API: its own CA, a server certificate for 127.0.0.1.

A real apiserver serves only HTTPS, and its clients behave accordingly: client-go (kubectl)
never sends a bearer token to an ``http://`` server (``rest.Config`` drops it with "no
transport security"), so the emulator serves HTTPS by default with a certificate signed by a
CA of its own, and every kubeconfig it or the region writes carries that CA as
``certificate-authority-data`` (as kubeadm's admin.conf does).

The keys are ECDSA P-256 (milliseconds to make; Go's and OpenSSL's TLS take them); the server
certificate names ``127.0.0.1``, ``::1`` and ``localhost`` (and the host given), valid for ten
years from an hour ago (a clock a little behind still accepts it).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

LOOPBACK_NAMES = ("127.0.0.1", "::1", "localhost")
VALIDITY = timedelta(days=3650)


@dataclass(frozen=True)
class TlsMaterial:
    """A CA certificate and a server certificate + key it signed, all PEM."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_data(self) -> str:
        """The CA as a kubeconfig's ``certificate-authority-data`` (base64 of the PEM)."""
        return base64.b64encode(self.ca_pem).decode("ascii")

    def server_context(self) -> ssl.SSLContext:
        """The server side: this certificate, HTTP/1.1 by ALPN (the emulator speaks no h2)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with _pem_files(self.cert_pem, self.key_pem) as (cert, key):
            context.load_cert_chain(cert, key)
        context.set_alpn_protocols(["http/1.1"])
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this CA only (for tests and the simulator's agent)."""
        return client_context(self.ca_pem)

    def write(self, directory: Path, prefix: str = "k8s") -> tuple[Path, Path, Path]:
        """Write ``<prefix>-ca.crt``, ``<prefix>-tls.crt`` and ``<prefix>-tls.key`` (0600)."""
        paths = (directory / f"{prefix}-ca.crt", directory / f"{prefix}-tls.crt",
                 directory / f"{prefix}-tls.key")
        for path, data, mode in zip(paths, (self.ca_pem, self.cert_pem, self.key_pem),
                                    (0o644, 0o644, 0o600), strict=True):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(path, mode)
        return paths

    @classmethod
    def read(cls, ca: Path, cert: Path, key: Path) -> TlsMaterial:
        return cls(ca.read_bytes(), cert.read_bytes(), key.read_bytes())


def client_context(ca_pem: bytes | str) -> ssl.SSLContext:
    """A client SSL context that trusts `ca_pem` (PEM) only."""
    text = ca_pem.decode("ascii") if isinstance(ca_pem, bytes) else ca_pem
    return ssl.create_default_context(cadata=text)


@contextlib.contextmanager
def _pem_files(cert_pem: bytes, key_pem: bytes) -> Iterator[tuple[str, str]]:
    # ssl loads a certificate chain from files only
    with tempfile.TemporaryDirectory(prefix="scoctl-tls-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key_pem)
        yield str(cert), str(key)


def generate(hosts: Sequence[str] = LOOPBACK_NAMES, *,
             common_name: str = "scoctl-sim") -> TlsMaterial:
    """A new CA and a server certificate for `hosts` (IP addresses and DNS names)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC) - timedelta(hours=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{common_name}-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys((*LOOPBACK_NAMES, *hosts)):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                     key_cert_sign=False, crl_sign=False,
                                     content_commitment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False,
                                     decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return TlsMaterial(
        ca_pem=ca_cert.public_bytes(pem),
        cert_pem=cert.public_bytes(pem),
        key_pem=key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


@functools.cache
def loopback() -> TlsMaterial:
    """One CA + certificate for 127.0.0.1 per process, shared by the emulators it starts."""
    return generate()
