"""``oanp``'s curated API: every name it lists is there, and importing it loads no framework
and no network library (the agents' side stays behind its own module path)."""

from __future__ import annotations

import oanp
import oanp.tlog
from tests.oanp.test_purity import loaded_by


def test_every_public_name_is_defined_once() -> None:
    assert len(set(oanp.__all__)) == len(oanp.__all__)
    missing = [name for name in oanp.__all__ if not hasattr(oanp, name)]
    assert missing == []


def test_the_transparency_logs_public_names_are_defined_once() -> None:
    assert len(set(oanp.tlog.__all__)) == len(oanp.tlog.__all__)
    assert [name for name in oanp.tlog.__all__ if not hasattr(oanp.tlog, name)] == []


def test_importing_the_package_loads_neither_a_framework_nor_the_agents_side() -> None:
    # oanp.net is loaded with any of its modules, so this one name covers the whole side.
    assert loaded_by("oanp", ("oanp.net",)) == ""
