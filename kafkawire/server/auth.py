"""The broker's security: listeners, TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

Listeners are named as Kafka names them: ``listeners=PLAINTEXT://:9092,SASL_SSL://:9093``,
each name mapped to a security protocol (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``,
``SASL_SSL``) by ``listener.security.protocol.map`` (the four names map to
themselves).  TLS listeners load a PEM key and certificate chain
(``ssl.keystore.location``, or inline ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``); ``ssl.truststore.location`` and
``ssl.client.auth`` ask clients for certificates.  Any ``ssl.*`` or ``sasl.*``
setting may be given for one listener as ``listener.name.<name>.<setting>``.

SASL users come from ``sasl.user.<name>=<password>`` settings and from the
file ``sasl.users.file`` (lines ``name=password``, or
``name.SCRAM-SHA-512=salt=...,stored_key=...,server_key=...,iterations=...``,
Kafka's credential form).  A password is salted as soon as it is read (a
random salt, ``sasl.scram.iterations`` rounds, RFC 5802's StoredKey and
ServerKey for each SCRAM mechanism) and only the salted credential is kept;
PLAIN checks a password against it.

The broker answers as Kafka's SASL authenticator does: before authentication
only ApiVersions, SaslHandshake and SaslAuthenticate are served (any other
request closes the connection); an unknown mechanism answers
UNSUPPORTED_SASL_MECHANISM, a wrong password SASL_AUTHENTICATION_FAILED, and
both close the connection after the answer.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Tuple

from kafkawire.protocol import ApiKey
from kafkawire.protocol.messages.sasl import SaslAuthenticateResponse, SaslHandshakeResponse
from kafkawire.server.codes import ILLEGAL_SASL_STATE
from kafkawire.server.config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker
    from kafkawire.server.dispatch import RequestContext

__all__ = ["SECURITY_PROTOCOLS", "SASL_MECHANISMS", "Listener", "Security", "ScramCredential",
           "scram_credential", "UserStore", "SaslServer", "AuthFailed", "register"]

log = logging.getLogger("kafkawire.server.auth")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SCRAM_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's bounds on a SCRAM credential's iteration count.
SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS = 4096, 16384
#: The largest SASL token accepted (Kafka's ``sasl.server.max.receive.size`` default).
MAX_TOKEN_BYTES = 524288
_FAILED = "Authentication failed: Invalid username or password"


class AuthFailed(Exception):
    """A SASL exchange failed: ``code`` is the Kafka error code answered, ``message`` its text."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- credentials ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ScramCredential:
    """A salted SCRAM credential (RFC 5802): what the broker keeps instead of a password."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __str__(self) -> str:
        b64 = _b64
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> "ScramCredential":
        """Kafka's form ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
        try:
            attrs = dict(p.split("=", 1) for p in text.strip().split(","))
            cred = cls(base64.b64decode(attrs["salt"], validate=True),
                       base64.b64decode(attrs["stored_key"], validate=True),
                       base64.b64decode(attrs["server_key"], validate=True),
                       int(attrs["iterations"]))
        except (ValueError, KeyError) as exc:
            raise ConfigError("a SCRAM credential reads salt=...,stored_key=...,server_key=...,"
                              f"iterations=... (base64 keys); got {text[:40]!r}...") from exc
        if not SCRAM_MIN_ITERATIONS <= cred.iterations <= SCRAM_MAX_ITERATIONS:
            raise ConfigError(f"SCRAM iterations must be {SCRAM_MIN_ITERATIONS} to "
                              f"{SCRAM_MAX_ITERATIONS}, got {cred.iterations}")
        return cred


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _salted(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_SCRAM_HASH[mechanism], password.encode("utf-8"), salt, iterations)


def scram_credential(mechanism: str, password: str, iterations: int = SCRAM_MIN_ITERATIONS,
                     salt: Optional[bytes] = None) -> ScramCredential:
    """Salt ``password`` for ``mechanism`` (``SCRAM-SHA-256`` or ``SCRAM-SHA-512``);
    ``str()`` of the result is the form ``sasl.users.file`` and ``sasl.user.<name>.<mechanism>``
    accept."""
    if mechanism not in _SCRAM_HASH:
        raise ConfigError(f"{mechanism} is not a SCRAM mechanism")
    if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
        raise ConfigError(f"SCRAM iterations must be {SCRAM_MIN_ITERATIONS} to "
                          f"{SCRAM_MAX_ITERATIONS}, got {iterations}")
    salt = os.urandom(32) if salt is None else salt
    h = _SCRAM_HASH[mechanism]
    salted = _salted(mechanism, password, salt, iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    return ScramCredential(salt, hashlib.new(h, client_key).digest(),
                           hmac.new(salted, b"Server Key", h).digest(), iterations)


def _check_password(mechanism: str, cred: ScramCredential, password: str) -> bool:
    h = _SCRAM_HASH[mechanism]
    salted = _salted(mechanism, password, cred.salt, cred.iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    return hmac.compare_digest(hashlib.new(h, client_key).digest(), cred.stored_key)


class UserStore:
    """Users and their salted credentials, per SCRAM mechanism."""

    def __init__(self) -> None:
        self.users: Dict[str, Dict[str, ScramCredential]] = {}

    def __len__(self) -> int:
        return len(self.users)

    def add_password(self, user: str, password: str, iterations: int) -> None:
        creds = self.users.setdefault(user, {})
        for mech in _SCRAM_HASH:
            creds[mech] = scram_credential(mech, password, iterations)

    def add_credential(self, user: str, mechanism: str, text: str) -> None:
        mech = mechanism.upper()
        if mech not in _SCRAM_HASH:
            raise ConfigError(f"user {user!r}: {mechanism} is not SCRAM-SHA-256 or SCRAM-SHA-512")
        self.users.setdefault(user, {})[mech] = ScramCredential.parse(text)

    def credential(self, user: str, mechanism: str) -> Optional[ScramCredential]:
        return self.users.get(user, {}).get(mechanism)

    def check_password(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s (against one of the user's salted credentials)."""
        creds = self.users.get(user)
        if not creds:
            return False
        mech, cred = sorted(creds.items())[-1]
        return _check_password(mech, cred, password)

    def add_line(self, line: str, iterations: int, where: str) -> None:
        """One line of a users file: ``name=password`` or ``name.<MECHANISM>=<credential>``."""
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{where}: expected name=password or "
                              f"name.SCRAM-SHA-512=salt=...; got {line.strip()[:40]!r}")
        name, dot, mech = key.rpartition(".")
        if dot and name and mech.upper() in _SCRAM_HASH:
            self.add_credential(name, mech, value)
        else:
            self.add_password(key, value, iterations)


# -- the SASL exchanges ----------------------------------------------------------------------
def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class SaslServer:
    """The broker side of one SASL exchange; :meth:`step` takes a client token and returns
    the broker's answer (``done`` is set once the client is authenticated)."""

    def __init__(self, mechanism: str, users: UserStore) -> None:
        self.mechanism = mechanism
        self.users = users
        self.done = False
        self.user: Optional[str] = None
        self._stage = 0
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""
        self._cred: Optional[ScramCredential] = None

    def _fail(self, why: str) -> AuthFailed:
        log.info("SASL %s authentication failed: %s", self.mechanism, why)
        if self.mechanism == "PLAIN":
            return AuthFailed(58, _FAILED)
        return AuthFailed(58, "Authentication failed during authentication due to invalid "
                              f"credentials with SASL mechanism {self.mechanism}")

    def step(self, token: bytes) -> bytes:
        if self.done or len(token) > MAX_TOKEN_BYTES:
            raise AuthFailed(ILLEGAL_SASL_STATE, "unexpected SASL token")
        if self.mechanism == "PLAIN":
            return self._plain(token)
        if self._stage == 0:
            return self._scram_first(token)
        return self._scram_final(token)

    # PLAIN (RFC 4616): authzid NUL authcid NUL password
    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise self._fail("malformed PLAIN message")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise self._fail("PLAIN message is not UTF-8") from None
        if not user or (authzid and authzid != user):
            raise self._fail("empty user name, or an authorization id other than the user")
        if not self.users.check_password(user, password):
            raise self._fail(f"wrong password or unknown user {user!r}")
        self.user, self.done = user, True
        return b""

    # SCRAM (RFC 5802, as Kafka runs it: no channel binding)
    def _scram_first(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("client-first message is not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or \
                (parts[1] and not parts[1].startswith("a=")):
            raise self._fail("malformed client-first message (channel binding is not offered)")
        self._gs2 = parts[0] + "," + parts[1] + ","
        self._first_bare = parts[2]
        attrs: Dict[str, str] = {}
        for item in self._first_bare.split(","):
            k, sep, v = item.partition("=")
            if not sep or k in attrs:
                raise self._fail("malformed client-first message")
            attrs[k] = v
        user = _unescape(attrs.get("n", ""))
        nonce = attrs.get("r", "")
        if not user or not nonce or "m" in attrs:
            raise self._fail("client-first message lacks a user or a nonce")
        if parts[1] and _unescape(parts[1][2:]) != user:
            raise self._fail("authorization id differs from the user")
        if attrs.get("tokenauth", "false").lower() == "true":
            raise self._fail("delegation tokens are not supported")
        cred = self.users.credential(user, self.mechanism)
        if cred is None:
            raise self._fail(f"no {self.mechanism} credential for user {user!r}")
        self.user, self._cred = user, cred
        self._nonce = nonce + base64.b64encode(os.urandom(18)).decode("ascii")
        self._server_first = (f"r={self._nonce},s={base64.b64encode(cred.salt).decode('ascii')},"
                              f"i={cred.iterations}")
        self._stage = 1
        return self._server_first.encode("utf-8")

    def _scram_final(self, token: bytes) -> bytes:
        assert self._cred is not None
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("client-final message is not UTF-8") from None
        without_proof, sep, proof_text = text.rpartition(",p=")
        attrs = dict(item.partition("=")[::2] for item in without_proof.split(","))
        try:
            proof = base64.b64decode(proof_text, validate=True)
            binding = base64.b64decode(attrs.get("c", ""), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise self._fail("malformed client-final message") from None
        if not sep or attrs.get("r") != self._nonce or binding != self._gs2:
            raise self._fail("client-final message does not match the exchange")
        h = _SCRAM_HASH[self.mechanism]
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode("utf-8")
        signature = hmac.new(self._cred.stored_key, auth_message, h).digest()
        if len(proof) != len(signature):
            raise self._fail("client proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(h, client_key).digest(), self._cred.stored_key):
            raise self._fail(f"wrong password for user {self.user!r}")
        self.done = True
        verifier = hmac.new(self._cred.server_key, auth_message, h).digest()
        return b"v=" + base64.b64encode(verifier)


# -- listeners and their settings ------------------------------------------------------------
class Listener(NamedTuple):
    """One listener: its name, security protocol, address, and what it asks of clients."""
    name: str
    protocol: str
    host: str
    port: int
    ssl_context: Optional[ssl.SSLContext]
    mechanisms: Tuple[str, ...]
    advertised: Optional[Tuple[str, int]]

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _parse_endpoints(text: str, what: str) -> List[Tuple[str, str, int]]:
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not name or not colon or not port.isdigit():
            raise ConfigError(f"{what}: expected NAME://HOST:PORT entries, got {item!r}")
        out.append((name.upper(), host.strip("[]"), int(port)))
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{what}: each listener name may appear once, got {text!r}")
    return out


class Security:
    """The listeners and users of a broker, read from its settings (errors are
    :class:`~kafkawire.server.config.ConfigError` at construction)."""

    def __init__(self, config: BrokerConfig, listen: Tuple[str, int],
                 advertised: Optional[Tuple[str, int]] = None) -> None:
        self.config = config
        pmap = {p: p for p in SECURITY_PROTOCOLS}
        for item in (config.get("listener.security.protocol.map") or "").split(","):
            if item.strip():
                name, sep, proto = item.partition(":")
                if not sep or proto.strip().upper() not in SECURITY_PROTOCOLS:
                    raise ConfigError("listener.security.protocol.map: expected NAME:PROTOCOL "
                                      f"entries with a protocol of {', '.join(SECURITY_PROTOCOLS)}; "
                                      f"got {item!r}")
                pmap[name.strip().upper()] = proto.strip().upper()
        text = config.get("listeners") or ""
        endpoints = (_parse_endpoints(text, "listeners") if text.strip()
                     else [("PLAINTEXT", listen[0], listen[1])])
        adv = {n: (h, p) for n, h, p in
               _parse_endpoints(config.get("advertised.listeners") or "", "advertised.listeners")}
        self.users = UserStore()
        self.listeners: List[Listener] = []
        for i, (name, host, port) in enumerate(endpoints):
            protocol = pmap.get(name)
            if protocol is None:
                raise ConfigError(f"listener {name} has no security protocol in "
                                  "listener.security.protocol.map")
            ctx = self._ssl_context(name) if protocol in ("SSL", "SASL_SSL") else None
            mechs: Tuple[str, ...] = ()
            if protocol.startswith("SASL_"):
                mechs = tuple(m.strip().upper() for m in
                              (self.get(name, "sasl.enabled.mechanisms") or "").split(",")
                              if m.strip())
                bad = [m for m in mechs if m not in SASL_MECHANISMS]
                if bad or not mechs:
                    raise ConfigError(f"sasl.enabled.mechanisms of listener {name}: "
                                      f"{', '.join(bad) or 'none given'}; this broker offers "
                                      f"{', '.join(SASL_MECHANISMS)}")
            a = adv.get(name) or (advertised if i == 0 else None)
            self.listeners.append(Listener(name, protocol, host or "0.0.0.0", port, ctx, mechs, a))
        if any(lst.sasl for lst in self.listeners):
            self._load_users()
            if not len(self.users):
                raise ConfigError("a SASL listener needs users: set sasl.user.<name>=<password> "
                                  "or sasl.users.file")

    def get(self, listener: str, key: str) -> Optional[str]:
        """A setting for one listener: ``listener.name.<name>.<key>``, else ``<key>``."""
        v = self.config.get(f"listener.name.{listener.lower()}.{key}")
        return self.config.get(key) if v is None else v

    def _ssl_context(self, listener: str) -> ssl.SSLContext:
        def g(key: str) -> Optional[str]:
            return self.get(listener, key)
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            if (g(key) or "PEM").upper() != "PEM":
                raise ConfigError(f"{key}={g(key)}: this broker reads PEM files only")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        location, key_pem, chain_pem = (g("ssl.keystore.location"), g("ssl.keystore.key"),
                                        g("ssl.keystore.certificate.chain"))
        password = g("ssl.key.password") or None
        try:
            if location:
                ctx.load_cert_chain(location, password=password)
            elif key_pem and chain_pem:
                self._load_inline(ctx, chain_pem, key_pem, password)
            else:
                raise ConfigError(f"listener {listener} uses TLS: set ssl.keystore.location (a PEM "
                                  "file with the private key and certificate chain), or "
                                  "ssl.keystore.key and ssl.keystore.certificate.chain")
            trust, trust_pem = g("ssl.truststore.location"), g("ssl.truststore.certificates")
            if trust or trust_pem:
                ctx.load_verify_locations(cafile=trust or None, cadata=trust_pem or None)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"listener {listener}: cannot load its TLS key, certificates or "
                              f"trust store: {exc}") from exc
        auth = (g("ssl.client.auth") or "none").lower()
        modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
        if auth not in modes:
            raise ConfigError(f"ssl.client.auth={auth}: expected none, requested or required")
        if auth != "none" and not (g("ssl.truststore.location") or g("ssl.truststore.certificates")):
            raise ConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location (the CAs "
                              "that sign client certificates)")
        ctx.verify_mode = modes[auth]
        return ctx

    @staticmethod
    def _load_inline(ctx: ssl.SSLContext, chain: str, key: str, password: Optional[str]) -> None:
        # ssl loads a key from a file only: a private temporary file, removed at once
        fd, path = tempfile.mkstemp(prefix="kafkawire-key-", suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(key.strip() + "\n" + chain.strip() + "\n")
            ctx.load_cert_chain(path, password=password)
        finally:
            os.unlink(path)

    def _load_users(self) -> None:
        try:
            iterations = int(self.config.get("sasl.scram.iterations") or SCRAM_MIN_ITERATIONS)
        except ValueError:
            raise ConfigError("sasl.scram.iterations must be a number") from None
        path = self.config.get("sasl.users.file")
        if path:
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except OSError as exc:
                raise ConfigError(f"sasl.users.file: {exc}") from exc
            for n, line in enumerate(lines, 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    self.users.add_line(line, iterations, f"{path} line {n}")
        for key, value in self.config.values.items():
            if key.startswith("sasl.user."):
                self.users.add_line(key[len("sasl.user."):] + "=" + value, iterations, key)


# -- per connection --------------------------------------------------------------------------
class SaslConnection:
    """One connection's SASL state on a SASL listener (the network layer asks
    :meth:`allows` before serving a request)."""

    def __init__(self, listener: Listener, users: UserStore) -> None:
        self.listener = listener
        self.users = users
        self.server: Optional[SaslServer] = None
        self.authenticated = False
        #: Set by a v0 SaslHandshake: the next frames are bare tokens, not requests.
        self.raw_tokens = False

    def handshake(self, mechanism: str, version: int) -> Tuple[SaslHandshakeResponse, bool]:
        """The answer to SaslHandshake and whether the connection stays open."""
        offered = list(self.listener.mechanisms)
        if self.server is not None:
            return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=offered), False
        if mechanism not in offered:
            log.info("SASL mechanism %r refused; %s offered", mechanism, ", ".join(offered))
            return SaslHandshakeResponse(error_code=33, mechanisms=offered), False
        self.server = SaslServer(mechanism, self.users)
        self.raw_tokens = version == 0
        return SaslHandshakeResponse(error_code=0, mechanisms=offered), True

    def authenticate(self, token: bytes) -> bytes:
        """One client token; raises :class:`AuthFailed`."""
        if self.server is None:
            raise AuthFailed(ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
        out = self.server.step(token)
        if self.server.done:
            self.authenticated = True
            self.raw_tokens = False
            log.debug("authenticated %s with SASL %s", self.server.user, self.server.mechanism)
        return out

    def answer(self, token: bytes) -> SaslAuthenticateResponse:
        """The SaslAuthenticate response for ``token`` (its error code set on failure)."""
        try:
            out = self.authenticate(token)
        except AuthFailed as exc:
            return SaslAuthenticateResponse(error_code=exc.code, error_message=exc.message,
                                            auth_bytes=b"", session_lifetime_ms=0)
        return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=out,
                                        session_lifetime_ms=0)


#: Requests a SASL listener serves before the client has authenticated.
PRE_AUTH_APIS = frozenset((ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE))


def register(broker: "Broker") -> None:
    """Build ``broker.security`` from its settings and answer SaslHandshake/SaslAuthenticate
    where no exchange is due (a non-SASL listener, or after authentication)."""
    broker.security = Security(broker.config, broker.listen, broker._advertised)

    async def handshake(ctx: "RequestContext", req: Any, version: int) -> SaslHandshakeResponse:
        return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])

    async def authenticate(ctx: "RequestContext", req: Any, version: int) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(
            error_code=ILLEGAL_SASL_STATE, auth_bytes=b"", session_lifetime_ms=0,
            error_message="SaslAuthenticate on a connection that is not in a SASL exchange")

    broker.dispatcher.register(ApiKey.SASL_HANDSHAKE, handshake)
    broker.dispatcher.register(ApiKey.SASL_AUTHENTICATE, authenticate)
