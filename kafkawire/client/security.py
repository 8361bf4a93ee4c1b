"""TLS and SASL for broker connections.

TLS wraps the TCP socket before the first request.  SASL runs right after
ApiVersions, as Kafka's clients do: SaslHandshake names the mechanism, then
SaslAuthenticate carries the mechanism's messages (KIP-152):

* PLAIN: one message, ``\\0user\\0password`` (RFC 4616).
* SCRAM-SHA-256 / SCRAM-SHA-512: client-first, server-first, client-final
  with the proof, server-final with the signature the client checks, so a
  broker that does not know the password is detected (RFC 5802, KIP-84).
* OAUTHBEARER: one message carrying the token the user's callable returns
  (RFC 7628, KIP-255); the callable runs on every (re)connect, so it can
  hand out fresh tokens.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import ssl
from typing import Any, Callable, Dict, Optional, Tuple

from kafkawire import errors
from kafkawire.client.exceptions import ClientError

__all__ = ["AuthenticationError", "make_ssl_context", "Sasl", "ScramClient", "plain_message",
           "oauth_message"]

log = logging.getLogger("kafkawire.client.security")


class AuthenticationError(ClientError, errors.AuthenticationError):
    """SASL authentication failed, or the broker proved it does not know the credentials."""


def make_ssl_context(cafile: Optional[str] = None, certfile: Optional[str] = None,
                     keyfile: Optional[str] = None, password: Optional[str] = None,
                     check_hostname: bool = True) -> ssl.SSLContext:
    """A client TLS context: the system CAs (or ``cafile``) and, for mutual TLS, a certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    ctx.check_hostname = check_hostname
    if not check_hostname:
        ctx.verify_mode = ssl.CERT_REQUIRED
    if certfile:
        ctx.load_cert_chain(certfile, keyfile, password)
    return ctx


def plain_message(username: str, password: str) -> bytes:
    """RFC 4616: ``authzid \\0 authcid \\0 passwd`` with an empty authzid."""
    return b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")


def oauth_message(token_provider: Callable[[], Any]) -> bytes:
    """RFC 7628's client response: a GS2 header, ``auth=Bearer <token>`` and extensions."""
    got = token_provider()
    extensions: Dict[str, str] = {}
    if isinstance(got, tuple):
        token, extensions = got[0], dict(got[1] or {})
    else:
        token = got
    if not isinstance(token, str) or not token:
        raise AuthenticationError("the OAUTHBEARER token provider returned no token "
                                  f"(got {type(token).__name__})")
    parts = [f"auth=Bearer {token}"] + [f"{k}={v}" for k, v in sorted(extensions.items())]
    return ("n,,\x01" + "\x01".join(parts) + "\x01\x01").encode("utf-8")


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """The client side of one SCRAM exchange (RFC 5802) for SHA-256 or SHA-512."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: Optional[str] = None) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.username = username
        self.password = password
        self.nonce = nonce or base64.b64encode(os.urandom(24)).decode("ascii")
        self.client_first_bare = f"n={_saslname(username)},r={self.nonce}"
        self._server_signature: Optional[bytes] = None

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()

    def first(self) -> bytes:
        return ("n,," + self.client_first_bare).encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if "e" in attrs:
            raise AuthenticationError(f"SCRAM: the broker refused: {attrs['e']}")
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise AuthenticationError(f"SCRAM: malformed server-first message {text!r}") from exc
        if not nonce.startswith(self.nonce) or len(nonce) <= len(self.nonce):
            raise AuthenticationError("SCRAM: the broker's nonce does not extend ours")
        if not 1 <= iterations <= 1_000_000:
            raise AuthenticationError(f"SCRAM: refusing an iteration count of {iterations}")
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode("utf-8"), salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.client_first_bare},{text},{without_proof}".encode("utf-8")
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("utf-8")

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if "e" in attrs:
            raise AuthenticationError(f"SCRAM: the broker refused: {attrs['e']}")
        if self._server_signature is None or "v" not in attrs or not hmac.compare_digest(
                base64.b64decode(attrs["v"]), self._server_signature):
            raise AuthenticationError("SCRAM: the broker's signature is wrong; it does not know "
                                      "the password (or something is in the middle)")


class Sasl:
    """What a connection needs to authenticate: the mechanism and its credentials."""

    def __init__(self, mechanism: str, username: Optional[str] = None,
                 password: Optional[str] = None,
                 token_provider: Optional[Callable[[], Any]] = None) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.token_provider = token_provider

    def exchange(self, roundtrip: Callable[[bytes], bytes]) -> None:
        """Run the mechanism; ``roundtrip(bytes) -> bytes`` is one SaslAuthenticate request."""
        mech = self.mechanism
        if mech == "PLAIN":
            roundtrip(plain_message(self.username or "", self.password or ""))
        elif mech.startswith("SCRAM-"):
            scram = ScramClient(mech, self.username or "", self.password or "")
            server_first = roundtrip(scram.first())
            server_final = roundtrip(scram.final(server_first))
            scram.verify(server_final)
        elif mech == "OAUTHBEARER":
            assert self.token_provider is not None
            roundtrip(oauth_message(self.token_provider))
        else:  # config validation keeps this out
            raise AuthenticationError(f"SASL mechanism {mech!r} is not supported")
        log.debug("SASL %s authentication succeeded", mech)


def security_from(security_protocol: str = "PLAINTEXT", ssl_context: Optional[ssl.SSLContext] = None,
                  ssl_cafile: Optional[str] = None, ssl_certfile: Optional[str] = None,
                  ssl_keyfile: Optional[str] = None, ssl_password: Optional[str] = None,
                  ssl_check_hostname: bool = True, sasl_mechanism: str = "PLAIN",
                  sasl_plain_username: Optional[str] = None,
                  sasl_plain_password: Optional[str] = None,
                  sasl_oauth_token_provider: Optional[Callable[[], Any]] = None
                  ) -> Tuple[Optional[ssl.SSLContext], Optional[Sasl]]:
    """The TLS context (or None) and SASL settings (or None) a security protocol asks for."""
    proto = security_protocol.upper()
    ctx = None
    if proto in ("SSL", "SASL_SSL"):
        ctx = ssl_context or make_ssl_context(ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password,
                                              ssl_check_hostname)
    sasl = None
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        sasl = Sasl(sasl_mechanism, sasl_plain_username, sasl_plain_password,
                    sasl_oauth_token_provider)
    return ctx, sasl
