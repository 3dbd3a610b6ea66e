"""What the collector saves across restarts (router/collector/service.py save_state and
load_state): templates and the options exporters told (sampling rates, system init time);
a missing or damaged file starts empty, never fails the start."""

from __future__ import annotations

from pathlib import Path

from router.collector.decode import Decoder
from router.collector.sampling import DomainOptions
from router.collector.service import load_state, save_state
from router.collector.templates import Field, Template
from router.settings import CollectorSettings

SETTINGS = CollectorSettings()


def test_templates_and_options_round_trip(tmp_path: Path) -> None:
    decoder = Decoder()
    template = Template(300, (Field(8, 0, 4), Field(12, 0, 4), Field(1, 0, 8)))
    decoder.templates.add("192.0.2.1", 7, template, 1_000.0)
    decoder._keep_options("192.0.2.1", 7, DomainOptions(10, {3: 100}, 12345))
    path = tmp_path / "collector" / "templates.json"
    save_state(path, decoder)
    loaded = load_state(path, SETTINGS)
    assert loaded.templates.get("192.0.2.1", 7, 300, 1_001.0) == template
    options = loaded.domain_options("192.0.2.1", 7)
    assert (options.rate, options.sampler_rates, options.init_ms) == (10, {3: 100}, 12345)
    assert not list(path.parent.glob("*.partial"))


def test_a_missing_or_damaged_state_starts_empty(tmp_path: Path) -> None:
    assert load_state(tmp_path / "none.json", SETTINGS).options_state() == []
    for text in ("{", '{"templates": 5, "options": []}', '{"templates": {}, "options": [{}]}'):
        path = tmp_path / "bad.json"
        path.write_text(text)
        decoder = load_state(path, SETTINGS)
        assert decoder.options_state() == []
    path.write_text(
        '{"templates": {"version": 1, "templates": []}, "options": [{"exporter": '
        '"a", "domain": 1, "rate": 0, "sampler_rates": [], "init_ms": null}]}'
    )
    assert load_state(path, SETTINGS).options_state() == []
