"""Forms of the merchant side: an agent with its private limits, an API key's label, the ACP
target and the agent's listing in the arbiter's directory.

Limit fields never render a value, not even back into a form that failed validation: a floor
price typed once goes into the vault and is never shown again.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.db.models import QuerySet

from arbiter_app.models import HandoffTarget, Listing
from oanp import discovery
from oanp.canonical import read_json
from oanp.envelope import IDENTIFIER_RULE, MAX_ITEM_BYTES, is_identifier
from oanp.errors import ProtocolError, SchemaInvalid
from oanp.money import MINOR_UNITS
from oanp.strategies import STRATEGIES
from oanp.terms import MAX_ISSUES
from oanp.tradeoffs import MAX_WEIGHT, WANT_SYNTAX, IssueLimits, TermsVault, read_want, read_weight
from sessions_app import services
from sessions_app.models import Merchant, Mode
from sessions_app.strategy_forms import TacticsFields
from sessions_app.vault import Limits

# Wide enough for any ISO 4217 minor unit (KWD has 3) and the protocol's 10^12 ceiling.
_PRICE = {"max_digits": 15, "decimal_places": 3, "min_value": Decimal("0.001"), "required": False}


class SealedNumberInput(forms.NumberInput):
    """A number input that is always rendered empty."""

    def format_value(self, value: Any) -> None:
        return None


class SealedTextarea(forms.Textarea):
    """A text area that is always rendered empty."""

    def format_value(self, value: Any) -> None:
        return None


def _price(label: str) -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        widget=SealedNumberInput(attrs={"autocomplete": "off", "step": "any"}),
        **_PRICE,
    )


class AgentForm(TacticsFields):
    agent_id = forms.CharField(
        label="Agent id",
        max_length=64,
        help_text=f"How buyers name this agent in session.open: {IDENTIFIER_RULE}.",
    )
    display_name = forms.CharField(label="Display name", max_length=200, required=False)
    mode = forms.ChoiceField(
        label="How it negotiates", choices=Mode.choices, widget=forms.RadioSelect
    )
    strategy = forms.ChoiceField(
        label="Strategy (hosted agents)",
        choices=[(name, named.label) for name, named in STRATEGIES.items()],
        initial="reference",
    )
    floor_price = _price("Floor price (never goes below)")
    ideal_price = _price("Ideal price (opens here)")
    terms = forms.CharField(
        label="Limits on each issue",
        required=False,
        # Room for every issue with the longest options, and no more to parse.
        max_length=MAX_ISSUES * 200,
        strip=False,
        widget=SealedTextarea(
            attrs={"rows": 4, "cols": 60, "spellcheck": "false", "autocomplete": "off"}
        ),
        help_text=f"One issue a line, as {WANT_SYNTAX}: the agent's best value, the worst it "
        "accepts, and how much the issue matters beside the price (no weight: 1). Two numbers "
        "for a number issue, as delivery_days=20..3@0.5 (best 20 days, at worst 3); two "
        "options for a choice, as support=none..standard@2 (an option holding .. or @ as a JSON "
        'string, as "24/7 @ phone"). An issue the buyer declares that '
        "is not named here is one the agent takes as the buyer offers it.",
    )
    price_weight = forms.CharField(
        label="Price weight",
        required=False,
        max_length=32,
        widget=SealedNumberInput(
            attrs={"autocomplete": "off", "step": "any", "min": 0, "max": MAX_WEIGHT}
        ),
        help_text="How much the price matters beside the issues' weights; empty is 1.",
    )
    reveal_after_end = forms.BooleanField(
        label="Reveal my floor after the session ends",
        required=False,
        help_text="Hosted agents: once a session that opened with this on has ended, agreed "
        "or not, the limits it committed to (floor and ideal price) are revealed to the "
        "arbiter, so the session page can show the zone of agreement and the surplus. A "
        "revealed limit stays in the session's record.",
    )

    def __init__(
        self,
        *args: Any,
        creating: bool,
        limits_set: bool = False,
        merchants: QuerySet[Merchant] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.creating = creating
        self.limits_set = limits_set
        if not creating:
            del self.fields["agent_id"]  # the identity keys and sessions are bound to
        if merchants is not None:
            self.fields["merchant"] = forms.ModelChoiceField(queryset=merchants, label="Merchant")
            self.order_fields(["merchant"])

    def clean_agent_id(self) -> str:
        agent_id: str = self.cleaned_data["agent_id"].strip()
        if not is_identifier(agent_id):
            raise forms.ValidationError(f"An agent id is {IDENTIFIER_RULE}.")
        try:
            services.check_agent_id(agent_id)
        except services.AgentIdTaken as taken:
            raise forms.ValidationError("This agent id is taken; choose another.") from taken
        return agent_id

    @property
    def sectioned_field_names(self) -> list[str]:
        """Fields the template shows in a fieldset of their own, not in the general list."""
        return ["floor_price", "ideal_price", "terms", "price_weight", *self.tactics_field_names]

    def clean_terms(self) -> tuple[IssueLimits, ...]:
        """Each line's issue limits; every bad line is named, never with its values."""
        text: str = self.cleaned_data["terms"]
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) > MAX_ISSUES:
            raise forms.ValidationError(f"A session has at most {MAX_ISSUES} issues: one a line.")
        issues: list[IssueLimits] = []
        problems = []
        for n, line in lines:
            try:
                want = read_want(line)
            except ValueError as bad:
                problems.append(f"Line {n}: {bad}.")
                continue
            if any(issue.name == want.name for issue in issues):
                problems.append(f"Line {n}: {want.name} has a line already.")
            issues.append(want)
        if problems:
            raise forms.ValidationError(problems)
        return tuple(issues)

    def clean_price_weight(self) -> Decimal | None:
        text = self.cleaned_data["price_weight"].strip()
        if not text:
            return None
        try:
            weight = read_weight(text, "The price weight")
        except ValueError as bad:
            raise forms.ValidationError(f"{bad}.") from None
        if weight == 0:
            raise forms.ValidationError("The price weight must be more than 0.")
        return weight

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        self.clean_tactics(data)
        issues, weight = data.get("terms"), data.get("price_weight")
        if weight is not None and not issues and not self.has_error("terms"):
            self.add_error(
                "price_weight", "A price weight weighs the price against the issues: name them too."
            )
        data["terms_vault"] = TermsVault(weight or Decimal(1), issues) if issues else None
        floor, ideal = data.get("floor_price"), data.get("ideal_price")
        if (floor is None) != (ideal is None) and not self.has_error("floor_price"):
            raise forms.ValidationError("Enter both the floor and the ideal price, or neither.")
        if floor is not None and ideal is not None and floor > ideal:
            self.add_error("floor_price", "The floor cannot be above the ideal price.")
        if data.get("mode") == Mode.HOSTED and floor is None and not self.limits_set:
            raise forms.ValidationError(
                "A hosted agent needs its limits: enter its floor and ideal price."
            )
        return data


class ItemLimitForm(forms.Form):
    item = forms.CharField(
        label="Item sku, id or route", max_length=200, required=False, strip=True
    )
    floor_price = _price("Floor")
    ideal_price = _price("Ideal")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        item, floor, ideal = data.get("item"), data.get("floor_price"), data.get("ideal_price")
        given = [v not in (None, "") for v in (item, floor, ideal)]
        if any(given) and not all(given):
            raise forms.ValidationError("Fill in the item, its floor and its ideal price.")
        if floor is not None and ideal is not None and floor > ideal:
            raise forms.ValidationError("The floor cannot be above the ideal price.")
        return data


class BaseItemLimitFormSet(forms.BaseFormSet):  # type: ignore[type-arg]
    def clean(self) -> None:
        if any(self.errors):
            return
        items = [form.cleaned_data.get("item") for form in self.forms if form.cleaned_data]
        items = [item for item in items if item]
        if len(items) != len(set(items)):
            raise forms.ValidationError("Each item may have one row of limits only.")


ItemLimitFormSet = forms.formset_factory(ItemLimitForm, formset=BaseItemLimitFormSet, extra=3)


def limits_from(form: AgentForm, items: BaseItemLimitFormSet) -> Limits | None:
    """The limits entered, or ``None`` when none were (an edit then keeps the sealed ones)."""
    floor, ideal = form.cleaned_data.get("floor_price"), form.cleaned_data.get("ideal_price")
    per_item = {
        row.cleaned_data["item"]: (row.cleaned_data["floor_price"], row.cleaned_data["ideal_price"])
        for row in items.forms
        if row.cleaned_data.get("item")
    }
    terms = form.cleaned_data.get("terms_vault")
    if floor is None:
        if per_item:
            form.add_error(None, "Per-item limits need the default floor and ideal price too.")
        if terms is not None:
            form.add_error(
                "terms",
                "New limits on issues need the floor and ideal price too: new limits replace "
                "all the sealed ones.",
            )
        return None
    return Limits(floor_price=floor, ideal_price=ideal, per_item=per_item, terms=terms)


#: The lifetimes a new API key may be issued with; "" never expires.
KEY_LIFETIMES = {
    "": ("Never", None),
    "7d": ("In 7 days", timedelta(days=7)),
    "30d": ("In 30 days", timedelta(days=30)),
    "90d": ("In 90 days", timedelta(days=90)),
    "365d": ("In a year", timedelta(days=365)),
}


class KeyForm(forms.Form):
    label = forms.CharField(
        label="Label", max_length=200, required=False, help_text="Where this key will be used."
    )
    expires = forms.ChoiceField(
        label="Expires",
        required=False,
        choices=[(key, label) for key, (label, _) in KEY_LIFETIMES.items()],
        help_text="From then on the API refuses it, as a revoked key.",
    )

    def lifetime(self) -> timedelta | None:
        return KEY_LIFETIMES[self.cleaned_data["expires"]][1]

    def clean_label(self) -> str:
        label: str = self.cleaned_data["label"]
        if label == services.HOSTED_KEY_LABEL:
            raise forms.ValidationError("This label is reserved; choose another.")
        return label


class AcpForm(forms.Form):
    """The ACP handoff target, a settings form: the endpoint is shown as saved; the key and
    the secret are write-only, never rendered back (not even after an error), so once a
    target is set an empty one keeps what is stored."""

    #: What a secret field says once a target holds one.
    KEEP = "Leave empty to keep the current one."

    endpoint = forms.URLField(
        label="ACP endpoint",
        max_length=2000,
        assume_scheme="https",
        help_text="Agreements are POSTed to this URL followed by /checkout_sessions.",
        widget=forms.URLInput(attrs={"placeholder": "https://shop.example/acp", "size": 50}),
    )
    api_key = forms.CharField(
        label="ACP API key",
        max_length=500,
        strip=True,
        help_text="Sent as Authorization: Bearer …; kept encrypted and never shown again.",
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}, render_value=False),
    )
    webhook_secret = forms.CharField(
        label="Webhook secret (optional)",
        max_length=200,
        required=False,
        strip=True,
        help_text="whsec_… to keep one you already verify with; leave empty to generate a new "
        "one, shown once.",
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}, render_value=False),
    )
    new_secret = forms.BooleanField(
        label="Generate a new webhook secret (shown once)",
        required=False,
        help_text="Handoffs are signed with it from the save on: update your receiver.",
    )

    def __init__(self, *args: Any, target: HandoffTarget | None = None, **kwargs: Any) -> None:
        if target is not None:
            kwargs.setdefault("initial", {"endpoint": target.endpoint})
        super().__init__(*args, **kwargs)
        if target is None:
            # A first target has nothing to keep: the key is needed, a secret is generated.
            del self.fields["new_secret"]
            return
        self.fields["api_key"].required = False
        self.fields[
            "api_key"
        ].help_text = (
            f"{self.KEEP} A new one is sent as Authorization: Bearer … and kept encrypted."
        )
        self.fields[
            "webhook_secret"
        ].help_text = f"{self.KEEP} Or paste a whsec_… secret you already verify with."


_CATALOG_ITEM = re.compile(r"catalog\[(\d+)\]\.?(.*)")


def _listing_error(field: str, message: str) -> str:
    """A refusal of :func:`oanp.discovery.parse_listing` as the form shows it: a catalog item
    by its place in the list, counted from 1."""
    found = _CATALOG_ITEM.fullmatch(field)
    if found is None:
        return message[:1].upper() + message[1:] + "."
    where = f"Item {int(found.group(1)) + 1}" + (f", {found.group(2)}" if found.group(2) else "")
    return f"{where}: {message}."


class ListingForm(forms.Form):
    """The agent's entry in the arbiter's directory of merchant agents. Public by nature, so,
    unlike the limits, rendered back as saved."""

    listed = forms.BooleanField(
        label="List this agent: buyers' agents find it in the arbiter's directory",
        required=False,
    )
    description = forms.CharField(
        label="Description",
        max_length=discovery.MAX_DESCRIPTION_CHARS,
        required=False,
        help_text="What the agent sells, in a few lines.",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
    )
    currencies = forms.CharField(
        label="Currencies",
        # Room for every known code, each with its separator ("USD, ").
        max_length=5 * len(MINOR_UNITS),
        required=False,
        help_text="ISO 4217 codes, separated by spaces or commas: USD, EUR.",
        widget=forms.TextInput(attrs={"placeholder": "USD, EUR", "size": 30}),
    )
    catalog = forms.CharField(
        label="Catalog",
        # Room for indentation around the largest catalog, and no more to parse.
        max_length=4 * discovery.MAX_CATALOG_BYTES,
        required=False,
        help_text=f"A JSON list of at most {discovery.MAX_CATALOG_ITEMS} items, each an object "
        f"of at most {MAX_ITEM_BYTES} bytes, as a buyer names one in session.open: "
        '[{"route": "SFO-JFK", "cabin": "economy"}].',
        widget=forms.Textarea(attrs={"rows": 8, "cols": 60, "spellcheck": "false"}),
    )

    def clean_currencies(self) -> list[str]:
        return [
            code.upper() for code in re.split(r"[\s,]+", self.cleaned_data["currencies"]) if code
        ]

    def clean_catalog(self) -> object:
        text: str = self.cleaned_data["catalog"]
        if not text:
            return []
        try:
            return read_json(text)
        except ProtocolError as exc:
            why = exc.__cause__ if isinstance(exc.__cause__, ValueError) else exc.detail
            raise forms.ValidationError(f"The catalog is not valid JSON: {why}.") from None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            data["listing"] = discovery.parse_listing(
                listed=data["listed"],
                description=data["description"],
                currencies=data["currencies"],
                catalog=data["catalog"],
            )
        except SchemaInvalid as invalid:
            for error in invalid.errors:
                self.add_error(
                    error.field.split("[", 1)[0], _listing_error(error.field, error.message)
                )
        return data


def listing_initial(listing: Listing | None) -> dict[str, Any]:
    """The listing form as the agent's listing stands, the catalog indented for editing."""
    if listing is None:
        return {}
    catalog = json.loads(listing.catalog)
    return {
        "listed": listing.listed,
        "description": listing.description,
        "currencies": ", ".join(listing.currencies),
        "catalog": json.dumps(catalog, indent=2, ensure_ascii=False) if catalog else "",
    }
