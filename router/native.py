"""The native extension (``native/``, Rust: the ingest hot loop), or None where it is not
installed: ``make install`` builds it; images and Ansible hosts install it from the wheelhouse
(the ``native`` extra). Without it every caller takes its pure-Python path."""

from __future__ import annotations

try:
    import shardlog_native as extension
except ImportError:  # pragma: no cover - exercised where the extension is absent
    extension = None  # type: ignore[assignment]

AVAILABLE = extension is not None

__all__ = ["AVAILABLE", "extension"]
