"""The docs stay true: every setting, route and make target is documented."""

from __future__ import annotations

import re

from pydantic import BaseModel

from router.app import create_app
from router.settings import Settings
from tests.support import REPO


def setting_names() -> list[str]:
    names = []
    for field_name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names += [f"SHARDLOG_{field_name}__{key}".upper() for key in annotation.model_fields]
        else:
            names.append(f"SHARDLOG_{field_name}".upper())
    return names


def test_every_setting_is_documented() -> None:
    text = (REPO / "docs" / "configuration.md").read_text()
    missing = [name for name in setting_names() if f"`{name}`" not in text]
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_every_route_is_documented() -> None:
    text = (REPO / "docs" / "api.md").read_text()
    routes = set(create_app(Settings()).openapi()["paths"])
    missing = [path for path in routes if path not in text]
    assert not missing, f"docs/api.md lacks {missing}"


def test_every_make_target_is_documented() -> None:
    makefile = (REPO / "Makefile").read_text()
    targets = re.findall(r"^([a-z-]+):.*## ", makefile, re.MULTILINE)
    docs = (REPO / "README.md").read_text() + (REPO / "docs" / "operations.md").read_text()
    missing = [
        t
        for t in targets
        if f"make {t}" not in docs
        and t not in ("help", "install", "lint", "typecheck", "pytest", "bench")
    ]
    assert not missing, f"README/operations lack {missing}"


def test_readme_quick_start_is_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make up", "make test"]
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci
