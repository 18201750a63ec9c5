"""Bearer tokens from a YAML file, compared in constant time and never logged::

    tokens:
      - {token: "s3cret-team-a-0123456789", tenant: team-a}
      - {token: "s3cret-admin-0123456789", admin: true}

A tenant token acts as its tenant: it sees and changes only that tenant's jobs. An admin token
sees every job and may submit for any tenant (the ``tenant`` field).
"""

from __future__ import annotations

import hmac
from pathlib import Path

from chronus_py.errors import InputError
from chronus_py.inputs import load_yaml
from chronus_py.service.core import Caller
from chronus_py.service.jobspec import TENANT, TENANT_RULE

MIN_TOKEN = 16


class Tokens:
    def __init__(self, entries: list[tuple[bytes, Caller]]):
        self.entries = entries

    def caller(self, header: str | None) -> Caller | None:
        """The caller an ``Authorization`` header names, or None. Every token is compared, so
        the time taken does not tell how close a guess was, nor which entry matched."""
        scheme, _, credentials = (header or "").strip().partition(" ")
        if scheme.lower() != "bearer":  # auth schemes are case-insensitive (RFC 9110 11.1)
            return None
        given = credentials.strip().encode()
        found = None
        for token, caller in self.entries:
            if hmac.compare_digest(token, given) and found is None:
                found = caller
        return found


def load_tokens(path: Path) -> Tokens:
    data = load_yaml(path, what="tokens file")
    if (
        not isinstance(data, dict)
        or set(data) != {"tokens"}
        or not isinstance(data["tokens"], list)
    ):
        raise InputError(path, "expected a mapping with one key, tokens: a list", field="tokens")
    entries: list[tuple[bytes, Caller]] = []
    seen: set[bytes] = set()
    for i, item in enumerate(data["tokens"]):
        where = f"tokens[{i}]"
        if not isinstance(item, dict) or not set(item) <= {"token", "tenant", "admin"}:
            raise InputError(path, "expected {token, tenant} or {token, admin: true}", field=where)
        token = item.get("token")
        if not isinstance(token, str) or len(token) < MIN_TOKEN or token != token.strip():
            raise InputError(
                path,
                f"expected a string of at least {MIN_TOKEN} characters without surrounding spaces",
                field=f"{where}.token",
            )
        admin = item.get("admin", False)
        if not isinstance(admin, bool):
            raise InputError(path, "expected true or false", field=f"{where}.admin")
        tenant = item.get("tenant")
        if tenant is None and not admin:
            raise InputError(
                path, "a tenant token needs a tenant (or admin: true)", field=f"{where}.tenant"
            )
        if tenant is not None and (not isinstance(tenant, str) or not TENANT.fullmatch(tenant)):
            raise InputError(path, TENANT_RULE, field=f"{where}.tenant")
        encoded = token.encode()
        if encoded in seen:
            raise InputError(path, "the same token appears twice", field=f"{where}.token")
        seen.add(encoded)
        entries.append((encoded, Caller(tenant or "admin", admin)))
    if not entries:
        raise InputError(path, "no tokens: nobody could use the server", field="tokens")
    return Tokens(entries)
