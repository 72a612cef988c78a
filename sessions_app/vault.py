"""Merchants' private limits at rest: Fernet under ``settings.OANP_VAULT_KEY``.

This key is not the arbiter's: the arbiter signs with its own keys and never imports this
module, so it cannot open a vault even by mistake.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings

from oanp.agents import MerchantVault
from oanp.tradeoffs import TermsVault, read_terms_vault


def _fernet() -> Fernet:
    return Fernet(settings.OANP_VAULT_KEY)


@dataclass(frozen=True)
class Limits:
    """A merchant agent's limits: a default, and optionally others per item sku; with
    ``terms``, its weights and limits on issues besides the price (the same for every item)."""

    floor_price: Decimal
    ideal_price: Decimal
    per_item: dict[str, tuple[Decimal, Decimal]]
    terms: TermsVault | None = None

    def for_item(self, item: dict[str, Any]) -> MerchantVault:
        key = str(item.get("sku") or item.get("id") or item.get("route") or "")
        floor, ideal = self.per_item.get(key, (self.floor_price, self.ideal_price))
        return MerchantVault(floor_price=floor, ideal_price=ideal, terms=self.terms)


def seal(limits: Limits) -> bytes:
    document = {
        "floor_price": str(limits.floor_price),
        "ideal_price": str(limits.ideal_price),
        "per_item": {k: [str(f), str(i)] for k, (f, i) in limits.per_item.items()},
    }
    if limits.terms is not None:
        document["terms"] = limits.terms.constraints()
    return _fernet().encrypt(json.dumps(document).encode())


def unseal(sealed: bytes) -> Limits:
    document = json.loads(_fernet().decrypt(bytes(sealed)))
    return Limits(
        floor_price=Decimal(document["floor_price"]),
        ideal_price=Decimal(document["ideal_price"]),
        per_item={k: (Decimal(f), Decimal(i)) for k, (f, i) in document["per_item"].items()},
        # Vaults sealed before terms existed hold none.
        terms=read_terms_vault(document["terms"]) if "terms" in document else None,
    )


def seal_text(text: str) -> bytes:
    return _fernet().encrypt(text.encode())


def unseal_text(sealed: bytes) -> str:
    return _fernet().decrypt(bytes(sealed)).decode()
