"""``--strategy`` tuned by ``--param NAME=VALUE`` on the agent commands: the registry builds
the strategy, and refuses a bad parameter before anything reaches an arbiter."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from oanp.agents.strategies import Boulware, ReferenceMerchant, TitForTat
from oanp.net import cli, commands

NEGOTIATE = [
    "negotiate",
    "--merchant",
    "merchant-sfo",
    "--item",
    "route=SFO-JFK",
    "--ceiling",
    "420",
    "--agent-id",
    "buyer-1",
    "--api-key",
    "unused",
    # Nothing listens here: a bad flag must stop the command before it connects.
    "--server",
    "http://127.0.0.1:9",
]


def merchant(tmp_path: Path, *flags: str) -> list[str]:
    return [
        "merchant",
        "--floor",
        "280",
        "--ideal",
        "400",
        "--agent-id",
        "merchant-1",
        "--api-key",
        "unused",
        "--server",
        "http://127.0.0.1:9",
        "--state",
        str(tmp_path / "state.json"),
        *flags,
    ]


def test_params_tune_the_strategy_of_each_command(tmp_path: Path) -> None:
    parse = cli._parser().parse_args
    buyer = parse([*NEGOTIATE, "--strategy", "boulware", "--param", "exponent=0.5"])
    assert commands.tuned_strategy(buyer, "buyer") == Boulware(exponent=Decimal("0.5"))
    seller = parse(
        merchant(
            tmp_path,
            "--param",
            "step_share=0.1",
            "--param",
            "last_round=counter",
            "--param",
            "inventory_pressure=0.2",
        )
    )
    assert commands.tuned_strategy(seller, "merchant") == ReferenceMerchant(
        step_share=Decimal("0.1"), last_round="counter", inventory_pressure=Decimal("0.2")
    )
    alias = parse([*NEGOTIATE, "--strategy", "titfortat", "--param", "min_share=0"])
    assert commands.tuned_strategy(alias, "buyer") == TitForTat(min_share=Decimal(0))
    # No --param: the strategy as it always played.
    assert commands.tuned_strategy(parse(NEGOTIATE), "buyer") == commands.strategy_named(
        "reference", "buyer"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--strategy", "boulware", "--param", "exponent=50"],
            "exponent is a number from 0.05 to 20",
        ),
        (
            ["--param", "exponent=2"],
            "reference has no parameter 'exponent'; its parameters: step_share",
        ),
        (["--param", "last_round=counter"], "last_round is a merchant's parameter"),
        (["--param", "acceptance"], "--param 'acceptance': expected NAME=VALUE"),
        (["--param", "=3"], "expected NAME=VALUE"),
        (["--param", "step_share=0.1", "--param", "step_share=0.2"], "step_share is given twice"),
    ],
)
def test_a_bad_param_exits_2_with_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main([*NEGOTIATE, *flags]) == commands.EXIT_USAGE
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.err.startswith("oanp negotiate: ")
    assert len(captured.err.splitlines()) == 1


def test_a_merchant_with_a_bad_param_exits_2_before_it_connects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    flags = ["--strategy", "linear", "--param", "acceptance=always"]
    assert cli.main(merchant(tmp_path, *flags)) == commands.EXIT_USAGE
    assert "acceptance is one of next, prev" in capsys.readouterr().err
    assert not (tmp_path / "state.json").exists()
