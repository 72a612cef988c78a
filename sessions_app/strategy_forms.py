"""The agent form's tactics: every strategy's parameters, as the registry declares them, and
the settle policy of a hosted agent.

Each strategy of :data:`oanp.agents.strategies.STRATEGIES` gets a group of fields named
``<strategy>__<parameter>``. All groups are in the page (a script shows the chosen one only);
only the chosen strategy's are read, and the registry validates them: an empty field is the
parameter's default. The fields are text on purpose, so that the registry's range check, not a
second copy of it in a form field, decides what is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms

from oanp.agents.strategies import STRATEGIES, NamedStrategy, Parameter, ParameterError
from oanp.wire.settlement import SettlePolicy
from sessions_app.models import HostedTactics, SettleWhen
from sessions_app.tactics import LAST_SETTLE_ROUND

ROLE = "merchant"  # the only role an agent of this site plays


def field_name(strategy: str, parameter: str) -> str:
    return f"{strategy}__{parameter}"


def _help(parameter: Parameter) -> str:
    default = parameter.default_for(ROLE)
    if parameter.kind == "choice":
        label = dict(parameter.choices)[str(default)]
        return f"{parameter.help} Default: {label[0].lower()}{label[1:]}."
    return (
        f"{parameter.help} From {parameter.minimum} to {parameter.maximum}; "
        f"empty is the default, {default}."
    )


def refusal(parameter: Parameter) -> str:
    """Why a value of ``parameter`` was refused, in the words of the form's label: the
    registry's own message names the parameter as code does (``step_share``)."""
    if parameter.kind == "choice":
        return f"{parameter.label}: choose one of the options listed."
    return f"{parameter.label} is a number from {parameter.minimum} to {parameter.maximum}."


def _field(parameter: Parameter) -> forms.Field:
    if parameter.kind == "choice":
        return forms.CharField(
            label=parameter.label,
            required=False,
            widget=forms.Select(choices=parameter.choices),
            help_text=_help(parameter),
        )
    return forms.CharField(
        label=parameter.label,
        required=False,
        max_length=32,
        widget=forms.NumberInput(
            attrs={
                "step": "any",
                "min": parameter.minimum,
                "max": parameter.maximum,
                "placeholder": parameter.default_for(ROLE),
            }
        ),
        help_text=_help(parameter),
    )


@dataclass(frozen=True)
class StrategyGroup:
    """One strategy's fields, for the template."""

    strategy: NamedStrategy
    fields: list[forms.BoundField]


class TacticsFields(forms.Form):
    """The fields a form adds for a hosted agent's tactics; its ``clean`` calls
    :meth:`clean_tactics`, which puts ``parameters`` and ``settle`` in ``cleaned_data``."""

    settle_when = forms.ChoiceField(
        label="Reveal the floor first to settle",
        choices=SettleWhen.choices,
        required=False,
        widget=forms.RadioSelect,
        help_text="In sessions a buyer opens for settlement by reveal: both limits then decide "
        "the price, at their midpoint.",
    )
    settle_from_round = forms.IntegerField(
        label="From round",
        required=False,
        min_value=1,
        max_value=LAST_SETTLE_ROUND,
        widget=forms.NumberInput(attrs={"min": 1, "max": LAST_SETTLE_ROUND}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for named in STRATEGIES.values():
            for parameter in named.parameters_for(ROLE):
                self.fields[field_name(named.name, parameter.name)] = _field(parameter)

    @property
    def tactics_field_names(self) -> list[str]:
        """Fields the template shows in the tactics' own fieldset, not in the general list."""
        names = [
            field_name(named.name, p.name)
            for named in STRATEGIES.values()
            for p in named.parameters_for(ROLE)
        ]
        return [*names, "settle_when", "settle_from_round"]

    @property
    def strategy_groups(self) -> list[StrategyGroup]:
        return [
            StrategyGroup(
                named, [self[field_name(named.name, p.name)] for p in named.parameters_for(ROLE)]
            )
            for named in STRATEGIES.values()
        ]

    def clean_tactics(self, data: dict[str, Any]) -> None:
        """The chosen strategy's parameters, checked by the registry, as ``parameters``; the
        settle policy as ``settle``. Other strategies' fields are ignored, whatever they hold."""
        named = STRATEGIES.get(data.get("strategy") or "")
        if named is not None:
            parameters = {parameter.name: parameter for parameter in named.parameters_for(ROLE)}
            raw = {
                name: value
                for name in parameters
                if (value := data.get(field_name(named.name, name)))
            }
            try:
                data["parameters"] = named.stored(ROLE, raw)
            except ParameterError as invalid:
                for name in invalid.errors:
                    self.add_error(field_name(named.name, name), refusal(parameters[name]))
        when = data.get("settle_when") or SettleWhen.NEVER
        from_round = data.get("settle_from_round")
        if when == SettleWhen.ROUND and from_round is None:
            if not self.has_error("settle_from_round"):
                self.add_error(
                    "settle_from_round",
                    f"Say from which round it settles: 1 to {LAST_SETTLE_ROUND}.",
                )
            return
        data["settle"] = SettlePolicy(when, from_round or 1)


def tactics_initial(tactics: HostedTactics | None) -> dict[str, Any]:
    """The tactics fields as ``tactics`` (a profile) stands; every group at its defaults
    otherwise, so that switching strategy shows where the new one starts."""
    initial: dict[str, Any] = {
        field_name(named.name, p.name): p.default_for(ROLE)
        for named in STRATEGIES.values()
        for p in named.parameters_for(ROLE)
    }
    initial["settle_when"] = SettleWhen.NEVER
    if tactics is None:
        return initial
    named = STRATEGIES[tactics.strategy]
    for name, value in named.stored(ROLE, tactics.parameters).items():
        initial[field_name(named.name, name)] = value
    initial["settle_when"] = tactics.settle_when
    if tactics.settle_when == SettleWhen.ROUND:
        initial["settle_from_round"] = tactics.settle_from_round
    return initial
