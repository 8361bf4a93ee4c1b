"""Certificates for TLS tests, made when the tests run (the ``cryptography`` package)."""
from __future__ import annotations

import datetime
import ipaddress

import pytest


def make_pki(folder):
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate (PEM)."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def build(subject, issuer, pub, key, *, ca, sans=None):
        b = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
             .public_key(pub).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=30))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(key, hashes.SHA256())

    def pem_key(k):
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    def pem_cert(c):
        return c.public_bytes(serialization.Encoding.PEM)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = build("kafkawire test CA", "kafkawire test CA", ca_key.public_key(), ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = build("localhost", "kafkawire test CA", srv_key.public_key(), ca_key, ca=False,
                sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = build("client", "kafkawire test CA", cli_key.public_key(), ca_key, ca=False)
    paths = {"ca": folder / "ca.pem", "server": folder / "server.pem",
             "client_cert": folder / "client.crt", "client_key": folder / "client.key"}
    paths["ca"].write_bytes(pem_cert(ca))
    paths["server"].write_bytes(pem_key(srv_key) + pem_cert(srv) + pem_cert(ca))
    paths["client_cert"].write_bytes(pem_cert(cli))
    paths["client_key"].write_bytes(pem_key(cli_key))
    return {k: str(v) for k, v in paths.items()}
