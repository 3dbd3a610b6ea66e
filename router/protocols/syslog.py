"""Syslog messages -> fields -> the shippers' Message (router/protocols/shipped.py). Pure.

Two formats, told apart after the PRI: ``<PRI>1 `` is RFC 5424 (the version digit and a
space), anything else RFC 3164 (BSD). A message must start with a PRI (0..191); one without is
refused, not guessed at.

RFC 5424: every header field, NILVALUE (``-``) as absent, structured data with the ``\\"``,
``\\\\`` and ``\\]`` escapes (a backslash before any other character stays, as the RFC says),
and a MSG that starts with a BOM is UTF-8 (the BOM dropped). A MSG without a BOM is decoded as
UTF-8 too, any invalid byte replaced by U+FFFD: the audit store holds text.

RFC 3164: ``<PRI>Mmm dd hh:mm:ss HOSTNAME TAG[PID]: MSG``, the seconds optionally with up to
six fractional digits (syslog-ng's ``frac-digits()``). Its timestamp names neither year
nor zone: the zone is a setting (SHARDLOG_SYSLOG__ZONE_3164, default UTC) and the year is the
one that puts the timestamp latest without being more than FUTURE_SLACK ahead of the receiving
time (a December message received on 1 January is last year's; a clock a minute fast stays
this year). An RFC 3339 timestamp in its place (rsyslog's forwarding format) is taken as it
is. A first word ending in ``:`` or holding ``[`` is the tag of a message without hostname.

The owner comes from a rule list (SHARDLOG_SYSLOG__OWNER_RULE): the first rule that yields a
non-empty value wins; none: owner None, and the message is refused by the audit rules."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, NamedTuple

from router.protocols.shipped import Message

MAX_PRI = 191
BOM = b"\xef\xbb\xbf"
NIL = "-"
FUTURE_SLACK = timedelta(days=2)
# RFC 5424 §6: the longest each header field may be.
MAX_HOSTNAME, MAX_APP_NAME, MAX_PROCID, MAX_MSGID, MAX_SD_NAME = 255, 48, 128, 32, 32

FACILITIES = (
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
    "authpriv", "ftp", "ntp", "security", "console", "solaris-cron",
    "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
)  # fmt: skip
SEVERITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)
# syslog-ng's frac-digits() adds up to six digits of a second: Nov 27 22:25:32.123456.
_BSD_TS = re.compile(r"([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?", re.ASCII)
_TAG = re.compile(r"([^\s\[:]{1,48})(?:\[([^\]\s]{1,128})\])?(:?) ?", re.ASCII)


class SyslogError(ValueError):
    """A message that does not parse; ``reason`` is short and fixed (a metric label)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class Parsed(NamedTuple):
    format: str  # "rfc5424" or "rfc3164"
    facility: int
    severity: int
    ts: datetime | None  # None: NILVALUE, the receiving time stands in
    hostname: str | None
    app_name: str | None
    procid: str | None
    msgid: str | None
    sd: dict[str, dict[str, Any]]  # SD-ID -> param -> value (a list when a name repeats)
    msg: str


def parse(data: bytes, now: datetime, zone: tzinfo = UTC) -> Parsed:
    """One syslog message (without its framing); raises SyslogError."""
    data = data.rstrip(b"\r\n\x00")
    facility, severity, rest = _pri(data)
    if rest[:2] == b"1 ":
        return _rfc5424(facility, severity, rest[2:])
    return _rfc3164(facility, severity, rest, now, zone)


def _pri(data: bytes) -> tuple[int, int, bytes]:
    end = data.find(b">", 1, 5)
    digits = data[1:end]
    if data[:1] != b"<" or end < 0 or not digits.isdigit() or (len(digits) > 1 and digits[0] == 48):
        raise SyslogError("no PRI")
    pri = int(digits)
    if pri > MAX_PRI:
        raise SyslogError("no PRI", f"{pri} is above {MAX_PRI}")
    return pri >> 3, pri & 7, data[end + 1 :]


# --- RFC 5424 ------------------------------------------------------------------------------


def _rfc5424(facility: int, severity: int, rest: bytes) -> Parsed:
    fields = rest.split(b" ", 5)
    if len(fields) < 6:
        raise SyslogError("bad header", "RFC 5424 needs six fields after the version")
    stamp, hostname, app_name, procid, msgid, tail = fields
    ts = None if stamp == b"-" else _rfc3339(_ascii(stamp, "timestamp"))
    sd, after = _structured_data(tail)
    if after[:1] == b" ":
        after = after[1:]
    elif after:
        raise SyslogError("bad structured data", "no space before MSG")
    msg = after[len(BOM) :] if after.startswith(BOM) else after
    return Parsed(
        "rfc5424",
        facility,
        severity,
        ts,
        _header(hostname, "hostname", MAX_HOSTNAME),
        _header(app_name, "app_name", MAX_APP_NAME),
        _header(procid, "procid", MAX_PROCID),
        _header(msgid, "msgid", MAX_MSGID),
        sd,
        msg.decode("utf-8", "replace"),
    )


def _ascii(value: bytes, name: str) -> str:
    if not value or any(b < 33 or b > 126 for b in value):
        raise SyslogError("bad header", f"{name} is not printable US-ASCII")
    return value.decode("ascii")


def _header(value: bytes, name: str, longest: int) -> str | None:
    text = _ascii(value, name)
    if len(text) > longest:
        raise SyslogError("bad header", f"{name} is longer than {longest}")
    return None if text == NIL else text


def _rfc3339(text: str) -> datetime:
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise SyslogError("bad timestamp", text[:40])
    return _datetime_of(match)


def _datetime_of(match: re.Match[str]) -> datetime:
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    if offset == "Z":
        zone: tzinfo = UTC
    else:
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            raise SyslogError("bad timestamp", f"offset {offset}")
        sign = -1 if offset[0] == "-" else 1
        zone = timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int((fraction or "0").ljust(6, "0")),
            tzinfo=zone,
        ).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise SyslogError("bad timestamp", str(exc)) from None


def _structured_data(tail: bytes) -> tuple[dict[str, dict[str, Any]], bytes]:
    """The SD elements at the start of ``tail`` and what follows them."""
    if tail[:1] == b"-":
        return {}, tail[1:]
    if tail[:1] != b"[":
        raise SyslogError("bad structured data", "neither - nor [")
    elements: dict[str, dict[str, Any]] = {}
    at = 0
    while tail[at : at + 1] == b"[":
        sd_id, at = _sd_name(tail, at + 1, b" ]")
        params = elements.setdefault(sd_id, {})
        while tail[at : at + 1] == b" ":
            name, at = _sd_name(tail, at + 1, b"=")
            if tail[at : at + 2] != b'="':
                raise SyslogError("bad structured data", f'{name} is not followed by ="')
            value, at = _sd_value(tail, at + 2)
            previous = params.get(name)
            if previous is None:
                params[name] = value
            elif isinstance(previous, list):
                previous.append(value)
            else:
                params[name] = [previous, value]
        if tail[at : at + 1] != b"]":
            raise SyslogError("bad structured data", f"{sd_id} is not closed by ]")
        at += 1
    return elements, tail[at:]


def _sd_name(tail: bytes, start: int, ends: bytes) -> tuple[str, int]:
    at = start
    while at < len(tail) and tail[at] not in ends:
        byte = tail[at]
        if byte < 33 or byte > 126 or byte in b'="]':
            raise SyslogError("bad structured data", "a name holds a forbidden character")
        at += 1
    if at == start or at - start > MAX_SD_NAME or at >= len(tail):
        raise SyslogError("bad structured data", "a name is empty, too long or unended")
    return tail[start:at].decode("ascii"), at


def _sd_value(tail: bytes, start: int) -> tuple[str, int]:
    """The value starting after its opening quote, unescaped, and the index after its closing
    quote."""
    out = bytearray()
    at = start
    while at < len(tail):
        byte = tail[at]
        if byte == 0x5C and at + 1 < len(tail) and tail[at + 1] in b'"\\]':
            out.append(tail[at + 1])
            at += 2
        elif byte == 0x22:
            return out.decode("utf-8", "replace"), at + 1
        else:
            out.append(byte)
            at += 1
    raise SyslogError("bad structured data", "a value is not closed by a quote")


# --- RFC 3164 ------------------------------------------------------------------------------


def _rfc3164(facility: int, severity: int, rest: bytes, now: datetime, zone: tzinfo) -> Parsed:
    text = rest.decode("utf-8", "replace")
    ts, text = _bsd_timestamp(text, now, zone)
    hostname: str | None = None
    first, _, after = text.partition(" ")
    if first and not first.endswith(":") and "[" not in first:
        if len(first) > MAX_HOSTNAME or not first.isprintable():
            raise SyslogError("bad header", "hostname")
        hostname, text = first, after
    app_name = procid = None
    tag = _TAG.match(text)
    if tag is not None and (tag.group(3) or tag.group(2)):
        app_name, procid = tag.group(1), tag.group(2)
        text = text[tag.end() :]
    return Parsed("rfc3164", facility, severity, ts, hostname, app_name, procid, None, {}, text)


def _bsd_timestamp(text: str, now: datetime, zone: tzinfo) -> tuple[datetime, str]:
    match = _BSD_TS.match(text)
    if match is not None and text[match.end() : match.end() + 1] in (" ", ""):
        month = MONTHS.get(match.group(1))
        if month is None:
            raise SyslogError("bad timestamp", match.group(0))
        day, hour, minute, second = (int(group) for group in match.groups()[1:5])
        micro = int((match.group(6) or "0").ljust(6, "0"))
        ts = _year_of(month, day, hour, minute, second, now, zone) + timedelta(microseconds=micro)
        return ts, text[match.end() + 1 :]
    stamp, _, after = text.partition(" ")
    return _rfc3339(stamp), after


def _year_of(
    month: int, day: int, hour: int, minute: int, second: int, now: datetime, zone: tzinfo
) -> datetime:
    """The latest of last, this and next year (in ``zone``) not more than FUTURE_SLACK ahead."""
    year = now.astimezone(zone).year
    for candidate in (year + 1, year, year - 1):
        try:
            ts = datetime(candidate, month, day, hour, minute, second, tzinfo=zone)
        except ValueError:  # 29 February of a common year, a 31st of a short month, 25:00
            continue
        if ts - now <= FUTURE_SLACK:
            return ts.astimezone(UTC)
    raise SyslogError("bad timestamp", f"no year fits {month:02d}-{day:02d}")


# --- owner and the shippers' message -------------------------------------------------------


class OwnerRule(NamedTuple):
    field: str  # hostname, app_name, or sd
    sd_id: str = ""
    param: str = ""


def owner_rules(text: str) -> tuple[OwnerRule, ...]:
    """``sd:shardlog@32473:owner,app_name,hostname`` -> its rules, in order; ValueError when a
    part is none of ``hostname``, ``app_name``, ``sd:<SD-ID>:<param>``."""
    rules: list[OwnerRule] = []
    for part in (p.strip() for p in text.split(",")):
        if part in ("hostname", "app_name"):
            rules.append(OwnerRule(part))
            continue
        kind, _, spec = part.partition(":")
        sd_id, _, param = spec.rpartition(":")
        if kind != "sd" or not sd_id or not param:
            raise ValueError(
                f"owner rule {part!r}: expected hostname, app_name or sd:<SD-ID>:<param>"
            )
        rules.append(OwnerRule("sd", sd_id, param))
    return tuple(rules)


def owner_of(parsed: Parsed, rules: tuple[OwnerRule, ...]) -> str | None:
    for rule in rules:
        if rule.field == "sd":
            value = parsed.sd.get(rule.sd_id, {}).get(rule.param)
            if isinstance(value, list):
                value = value[0]
        else:
            value = parsed.hostname if rule.field == "hostname" else parsed.app_name
        if value:
            return str(value)
    return None


def attrs_of(parsed: Parsed) -> dict[str, Any]:
    """facility and severity by name, the header fields present, structured data nested."""
    attrs: dict[str, Any] = {
        "facility": FACILITIES[parsed.facility],
        "severity": SEVERITIES[parsed.severity],
    }
    for name in ("hostname", "app_name", "procid", "msgid"):
        value = getattr(parsed, name)
        if value is not None:
            attrs[name] = value
    if parsed.sd:
        attrs["sd"] = parsed.sd
    return attrs


def message(parsed: Parsed, rules: tuple[OwnerRule, ...], received: datetime) -> Message:
    ts = received if parsed.ts is None else parsed.ts
    return Message(owner_of(parsed, rules), ts, parsed.msg, attrs_of(parsed))
