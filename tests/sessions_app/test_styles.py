"""The colours of static/css/app.css, in both schemes: text on a filled button meets WCAG AA."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

CSS = (ROOT / "static" / "css" / "app.css").read_text()
LIGHT, DARK = CSS.split("@media (prefers-color-scheme: dark)", 1)


def colour(block: str, name: str) -> str:
    found = re.search(rf"--{name}:\s*(#[0-9a-fA-F]{{6}})", block)
    assert found is not None, f"--{name} is not set here"
    return found.group(1)


def luminance(hex_colour: str) -> float:
    """Relative luminance, as WCAG 2 defines it."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(one: str, other: str) -> float:
    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_formula_matches_wcag_examples() -> None:
    assert contrast("#ffffff", "#000000") == pytest.approx(21)
    assert contrast("#ffffff", "#7ab0f0") == pytest.approx(2.25, abs=0.01)  # the old dark button


def test_the_buttons_use_the_colour_meant_for_text_on_a_fill() -> None:
    assert "button { background: var(--accent); color: var(--on-fill);" in CSS
    assert 'button.danger[type="submit"] { background: var(--bad); color: var(--on-fill); }' in CSS


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("fill", ["accent", "bad"])
def test_text_on_a_filled_button_meets_aa(scheme: str, fill: str) -> None:
    block = LIGHT if scheme == "light" else DARK
    assert contrast(colour(block, "on-fill"), colour(block, fill)) >= 4.5
