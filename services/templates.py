"""Render the service configuration templates that services/ and ansible/ share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

TEMPLATE_DIR = Path(__file__).with_name("templates")

_environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # noqa: S701 - these are config files, not HTML
)


def render(template_name: str, **variables: Any) -> str:
    return _environment.get_template(template_name).render(**variables)
