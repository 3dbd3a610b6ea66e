"""Controller for the syslog listener as a background process (`shardlog syslog`, what `make
up` starts beside the router): the collector's controller with another command. Ready when its
/health answers; stopped by SIGTERM (it writes what it has queued first), then SIGKILL."""

from __future__ import annotations

from services.collector_process import CollectorProcess


class SyslogProcess(CollectorProcess):
    command = "syslog"
