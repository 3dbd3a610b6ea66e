"""The flow collector's ground truth: deterministic packet captures and what an exporter that
reads them must report (tests/flowtruth proves it against softflowd and nfdump)."""
