"""The router's settings stand alone: reading them does not import the local launcher."""

import subprocess
import sys

from tests.support import REPO


def test_settings_do_not_import_the_launcher() -> None:
    probe = (
        "import sys, router.settings; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'services'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
