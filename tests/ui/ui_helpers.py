"""The tenants' tokens (those of ``serving.TOKENS``) and the browser's flags, shared by the
view's tests and their fixtures.

A module of its own: ``conftest`` is a name every test folder has, so importing from it picks
one at random when the whole suite runs."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = {
    "team-a": "team-a-token-0123456789",
    "team-b": "team-b-token-0123456789",
    "admin": "admin-token-0123456789",
}


def bearer(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN[who]}"}
