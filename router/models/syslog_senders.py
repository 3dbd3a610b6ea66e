"""Bodies of the syslog senders admin API (router/api/syslog_senders.py)."""

from __future__ import annotations

from pydantic import Field

from router.catalog.rules import NAME_PATTERN
from router.models.admin import Body
from router.models.common import Out

SENDER_DESCRIPTION = (
    "A network (192.0.2.0/24, 2001:db8::/48; a bare address is its /32 or /128) or "
    "cert:<common name>, the subject common name of a client certificate the listener verified "
    "on its TLS port"
)


class SyslogSenderIn(Body):
    tenant: str | None = Field(
        None,
        pattern=NAME_PATTERN.pattern,
        description="The tenant the sender's messages are written as; null: the caller's",
    )


class SyslogSender(Out):
    sender: str = Field(description=SENDER_DESCRIPTION + ", in its one spelling")
    tenant: str
