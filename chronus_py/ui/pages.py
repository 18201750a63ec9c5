"""The Jinja2 environment of the view's pages and the replay report (one home for both)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from chronus_py.ui.format import FILTERS

HERE = Path(__file__).parent
TEMPLATES = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(("html",)),
    trim_blocks=True,
    lstrip_blocks=True,
)
TEMPLATES.filters.update(FILTERS)
