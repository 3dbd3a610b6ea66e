import signal
import subprocess
import sys
import time

from services.process import is_alive, process_state, terminate

IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while process_state(child.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_state(child.pid) == "Z"
    assert not is_alive(child.pid)
    child.wait()
    assert process_state(child.pid) is None


def test_terminate_escalates_to_kill() -> None:
    child = subprocess.Popen([sys.executable, "-c", IGNORES_TERM])
    time.sleep(0.5)  # let it install the handler
    assert terminate(child.pid, signal.SIGTERM, timeout=0.5) is True
    assert child.wait(5) == -signal.SIGKILL


def test_terminate_stops_politely_when_it_can() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert terminate(child.pid, signal.SIGTERM, timeout=5) is False
    assert child.wait(5) == -signal.SIGTERM
