"""The Jinja2 environment of the view's pages and the replay report (one home for both), and
what identifies the code that draws them (``RENDERING``).

The templates are read once, at import, and rendered from what was read: a template changed
on disk under a running server (an upgrade installed before the restart) took effect at once
through Jinja2's reload, while the ETags the server had already handed out still answered 304,
so an open page kept its old look and a full one came back mixed. Now the running server draws
with the files it hashed, and the next start draws with the new ones under a new ``RENDERING``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Mapping

from jinja2 import DictLoader, Environment, select_autoescape

from chronus_py.ui.format import FILTERS

HERE = Path(__file__).parent


def sources(folder: Path) -> dict[str, str]:
    """Every template under ``folder`` by its name, as read now."""
    return {
        path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(folder.rglob("*.html"))
    }


def rendering(templates: Mapping[str, str], static: Path) -> str:
    """What identifies the code that draws the pages: a hash of the templates and of every
    static file (a script or style changes a page without changing its HTML). Part of every
    ETag and every static address, so an upgraded server never answers 304 for a page an older
    one drew. (Not the package's version: a change in the Python that draws is in the page
    itself, which the ETag hashes too, and an unreleased checkout has one version throughout.)"""
    digest = hashlib.blake2b(digest_size=8)
    for name, text in sorted(templates.items()):
        digest.update(b"template\0" + name.encode() + b"\0" + text.encode() + b"\0")
    for path in sorted(p for p in static.rglob("*") if p.is_file()):
        name = path.relative_to(static).as_posix()
        digest.update(b"static\0" + name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


SOURCES = sources(HERE / "templates")
RENDERING = rendering(SOURCES, HERE / "static")
TEMPLATES = Environment(
    loader=DictLoader(SOURCES),
    autoescape=select_autoescape(("html",)),
    trim_blocks=True,
    lstrip_blocks=True,
)
TEMPLATES.filters.update(FILTERS)
TEMPLATES.globals["rendering"] = RENDERING
