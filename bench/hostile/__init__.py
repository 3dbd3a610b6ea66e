"""What hostile or merely huge bodies cost the router: bench/hostile (bodies by size) and
bench/hostile/decoders (amplified bodies, idle syslog connections)."""

from __future__ import annotations

import subprocess
import sys


def started_poster(script: str, *args: str) -> subprocess.Popen[str]:
    """``script`` (python -c) in a process of its own, so that building and sending its bodies
    takes no turns from the probe: started once it printed a line (ready), then told to go."""
    poster = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert poster.stdin is not None and poster.stdout is not None
    poster.stdout.readline()
    poster.stdin.write("go\n")
    poster.stdin.flush()
    return poster
