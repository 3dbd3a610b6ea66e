"""The flow collector's benchmark and its ground truth: deterministic packet captures and what
an exporter that reads them must report (tests/flowtruth proves it against softflowd and
nfdump), and NetFlow v5/v9/IPFIX message builders shared with the decoder's tests."""
