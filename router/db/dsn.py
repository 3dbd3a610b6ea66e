"""Checks of libpq connection strings (URI or key=value form, multi-host allowed) before they
enter the catalog, so that a typo is a 422 naming ``dsn`` instead of a shard that never connects."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from router.errors import excerpt

_KNOWN_PARAMS = frozenset(
    {
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "connect_timeout",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslcrl",
        "sslpassword",
        "sslcompression",
        "sslsni",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "requiressl",
        "krbsrvname",
        "gsslib",
        "gssencmode",
        "service",
        "target_session_attrs",
        "load_balance_hosts",
        "channel_binding",
        "server_settings",
        "direct_tls",
    }
)
_TARGET_SESSION_ATTRS = frozenset(
    {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}
)
_KEYWORD_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)")


class DsnError(ValueError):
    """The connection string is malformed; the message says where."""


@dataclass(frozen=True)
class ParsedDsn:
    hosts: tuple[tuple[str, int], ...]
    dbname: str | None
    user: str | None
    params: dict[str, str] = field(default_factory=dict)

    @property
    def multi_host(self) -> bool:
        return len(self.hosts) > 1


def _port(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= 65535:
        raise DsnError(f"port {excerpt(text)} is not a number from 1 to 65535")
    return int(text)


def _check_params(params: dict[str, str]) -> None:
    for name in params:
        if name not in _KNOWN_PARAMS:
            raise DsnError(f"unknown connection parameter {excerpt(name)}")
    timeout = params.get("connect_timeout")
    if timeout is not None and not re.fullmatch(r"-?[0-9]{1,9}", timeout):
        raise DsnError(f"connect_timeout {excerpt(timeout)} is not a whole number of seconds")
    attrs = params.get("target_session_attrs")
    if attrs is not None and attrs not in _TARGET_SESSION_ATTRS:
        raise DsnError(
            f"target_session_attrs {excerpt(attrs)} is not one of "
            + ", ".join(sorted(_TARGET_SESSION_ATTRS))
        )


def _split_host_port(item: str) -> tuple[str, str | None]:
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise DsnError(f"malformed host {excerpt(item)}")
        return host, rest[1:] or None
    host, _, port = item.partition(":")
    return host, port or None


def _parse_uri(dsn: str) -> ParsedDsn:
    parts = urlsplit(dsn)
    if parts.fragment:
        raise DsnError("a connection URI has no #fragment")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    user = unquote(userinfo.partition(":")[0]) or None
    password = unquote(userinfo.partition(":")[2]) if ":" in userinfo else None
    hosts: list[tuple[str, int]] = []
    for item in hostlist.split(","):
        host, port = _split_host_port(item)
        if not host:
            raise DsnError("every host in the list needs a name or address")
        hosts.append((unquote(host), _port(port) if port else 5432))
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
        params = dict(pairs)
    except ValueError as exc:
        raise DsnError(f"malformed query string: {exc}") from exc
    _check_params(params)
    if password is not None:
        params.setdefault("password", password)
    dbname = unquote(parts.path.lstrip("/")) or params.get("dbname")
    return ParsedDsn(tuple(hosts), dbname, params.get("user", user), params)


def _parse_keywords(dsn: str) -> ParsedDsn:
    params: dict[str, str] = {}
    position = 0
    text = dsn.strip()
    while position < len(text):
        match = _KEYWORD_PAIR.match(text, position)
        if not match or match.end() == position:
            raise DsnError(f"cannot parse {excerpt(text[position:])}: expected keyword=value")
        key, value = match.group(1), match.group(2)
        if value.startswith("'"):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params[key] = value
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    _check_params(params)
    host_names = params.get("host", params.get("hostaddr", "")).split(",")
    if host_names == [""]:
        raise DsnError("no host given")
    ports = params.get("port", "").split(",") if params.get("port") else []
    if len(ports) > 1 and len(ports) != len(host_names):
        raise DsnError(f"{len(host_names)} hosts but {len(ports)} ports")
    hosts = []
    for index, host in enumerate(host_names):
        if not host:
            raise DsnError("every host in the list needs a name or address")
        port = ports[index] if len(ports) > 1 else (ports[0] if ports else "5432")
        hosts.append((host, _port(port)))
    return ParsedDsn(tuple(hosts), params.get("dbname"), params.get("user"), params)


def parse_dsn(dsn: str) -> ParsedDsn:
    if not dsn or not dsn.strip():
        raise DsnError("empty connection string")
    if any(ord(char) < 32 for char in dsn):
        raise DsnError("control characters in connection string")
    if re.match(r"^[a-z][a-z0-9+.-]*://", dsn, re.IGNORECASE):
        scheme = dsn.split("://", 1)[0].lower()
        if scheme not in ("postgres", "postgresql"):
            raise DsnError(f"scheme {excerpt(scheme)} is not postgresql://")
        return _parse_uri(dsn)
    if "=" not in dsn:
        raise DsnError("neither a postgresql:// URI nor keyword=value pairs")
    return _parse_keywords(dsn)


@functools.lru_cache(maxsize=1024)
def multi_host(dsn: str) -> bool:
    """The DSN names several hosts: the shard can fail over to another of them."""
    try:
        return parse_dsn(dsn).multi_host
    except DsnError:
        return False


_URI_PARTS = frozenset({"host", "hostaddr", "port", "user", "password", "dbname"})


def as_uri(dsn: str) -> str:
    """The DSN in URI form: asyncpg reads only postgresql:// URIs, libpq both forms."""
    if "://" in dsn:
        return dsn
    parsed = parse_dsn(dsn)
    userinfo = ""
    if parsed.user:
        userinfo = quote(parsed.user, safe="")
        if "password" in parsed.params:
            userinfo += ":" + quote(parsed.params["password"], safe="")
        userinfo += "@"
    hosts = ",".join(
        f"[{host}]:{port}" if ":" in host else f"{quote(host, safe='')}:{port}"
        for host, port in parsed.hosts
    )
    query = urlencode({k: v for k, v in parsed.params.items() if k not in _URI_PARTS})
    path = "/" + quote(parsed.dbname, safe="") if parsed.dbname else ""
    return f"postgresql://{userinfo}{hosts}{path}" + (f"?{query}" if query else "")


def for_asyncpg(dsn: str) -> tuple[str, float | None]:
    """The DSN as asyncpg takes it, and libpq's connect_timeout (seconds; None when absent or
    0). asyncpg would send connect_timeout to the server as a setting, which refuses it."""
    parsed = parse_dsn(dsn)
    seconds = parsed.params.get("connect_timeout")
    uri = as_uri(dsn)
    if seconds is None:
        return uri, None
    parts = urlsplit(uri)
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "connect_timeout"])
    uri = parts._replace(query=query).geturl()
    # libpq: 0 or negative waits forever, and anything below 2 s counts as 2 s.
    return uri, (max(2.0, float(seconds)) if int(seconds) > 0 else None)


def with_user(dsn: str, user: str) -> str:
    """The DSN in URI form, logging in as ``user``: the DSN's user and password are left out
    (the password of ``user`` comes from the password file)."""
    parts = urlsplit(as_uri(dsn))
    hosts = parts.netloc.rpartition("@")[2]
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode([(k, v) for k, v in pairs if k not in ("user", "password")], safe="/")
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}@{hosts}", query=query))
