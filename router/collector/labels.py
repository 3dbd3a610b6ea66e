"""Label values of the collector's metrics, from a bounded set: a label value is a time series
for as long as the process lives, and every field of a datagram (its source address included,
over UDP) is the sender's choice. Versions other than 5, 9 and 10 are ``other``; mapped
exporters are named by their address, and so are the first ``limit`` unmapped addresses
seen; the rest are counted under ``other``."""

from __future__ import annotations

OTHER = "other"
_VERSIONS = {5: "5", 9: "9", 10: "10"}


def version_label(version: int) -> str:
    return _VERSIONS.get(version, OTHER)


class ExporterLabels:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._named: set[str] = set()
        self._unmapped = 0

    def __call__(self, exporter: str, mapped: bool = False) -> str:
        """The label of an exporter's address; mapped exporters always get their own."""
        if exporter in self._named:
            return exporter
        if not mapped:
            if self._unmapped >= self.limit:
                return OTHER
            self._unmapped += 1
        self._named.add(exporter)
        return exporter
