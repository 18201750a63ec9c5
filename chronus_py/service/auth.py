"""Bearer tokens from a YAML file, compared in constant time and never logged::

    tokens:
      - {token: "s3cret-team-a-0123456789", tenant: team-a}
      - {token: "s3cret-admin-0123456789", admin: true}

A tenant token acts as its tenant: it sees and changes only that tenant's jobs. An admin token
sees every job and may submit for any tenant (the ``tenant`` field).
"""

from __future__ import annotations

import hmac
import re
from pathlib import Path

from chronus_py.errors import InputError
from chronus_py.inputs import load_yaml
from chronus_py.service.core import Caller

MIN_TOKEN = 16
TENANT = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""A tenant's name: the characters of an id (``jobspec``; the ``tenant`` an admin may give a
job) but ``:``. A tenant's job is ``TENANT:ID`` in the service, and ids may hold ``:``, so
tenants ``a`` and ``a:b`` would name one job ``a:b:x`` (tenant ``a``'s id ``b:x``, tenant
``a:b``'s ``x``): the second to choose it got a 409, telling that the other's job exists."""


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
            raise InputError(
                path,
                "expected 1-128 characters of A-Z a-z 0-9 . _ - (no ':', which ends a tenant "
                "in a job's id)",
                field=f"{where}.tenant",
            )
        encoded = token.encode()
        if encoded in seen:
            raise InputError(path, "the same token appears twice", field=f"{where}.token")
        seen.add(encoded)
        entries.append((encoded, Caller(tenant or "admin", admin)))
    if not entries:
        raise InputError(path, "no tokens: nobody could use the server", field="tokens")
    return Tokens(entries)
