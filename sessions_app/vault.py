"""Merchants' private limits at rest: Fernet under ``settings.OANP_VAULT_KEY``.

This key is not the arbiter's: the arbiter signs with its own keys and never imports this
module, so it cannot open a vault even by mistake.

An agent's vault seals its :class:`~oanp.agents.pricelist.PriceList` (limits per currency and item,
its terms); each hosted session seals the one :class:`~oanp.agents.vaults.MerchantVault` it was
opened on, so that editing the agent never changes a running session.
"""

from __future__ import annotations

import json
from decimal import Decimal

from cryptography.fernet import Fernet
from django.conf import settings

from oanp.agents.pricelist import PriceList, read_price_list
from oanp.agents.tradeoffs import read_terms_vault
from oanp.agents.vaults import MerchantVault


def _fernet() -> Fernet:
    return Fernet(settings.OANP_VAULT_KEY)


def _seal_json(document: object) -> bytes:
    return _fernet().encrypt(json.dumps(document).encode())


def _unseal_json(sealed: bytes) -> dict[str, object]:
    document = json.loads(_fernet().decrypt(bytes(sealed)))
    assert isinstance(document, dict)
    return document


def seal(prices: PriceList) -> bytes:
    return _seal_json(prices.document())


def unseal(sealed: bytes) -> PriceList:
    return read_price_list(_unseal_json(sealed))


def unseal_document(sealed: bytes) -> dict[str, object]:
    """A vault's document as sealed, whatever its form: what a migration reads."""
    return _unseal_json(sealed)


def seal_session_vault(vault: MerchantVault) -> bytes:
    document: dict[str, object] = {
        "floor_price": str(vault.floor_price),
        "ideal_price": str(vault.ideal_price),
    }
    if vault.terms is not None:
        document["terms"] = vault.terms.constraints()
    return _seal_json(document)


def unseal_session_vault(sealed: bytes) -> MerchantVault:
    document = _unseal_json(sealed)
    return MerchantVault(
        floor_price=Decimal(str(document["floor_price"])),
        ideal_price=Decimal(str(document["ideal_price"])),
        # Sessions opened before terms existed hold none.
        terms=read_terms_vault(document["terms"]) if "terms" in document else None,
    )


def seal_text(text: str) -> bytes:
    return _fernet().encrypt(text.encode())


def unseal_text(sealed: bytes) -> str:
    return _fernet().decrypt(bytes(sealed)).decode()
