"""Forms of the merchant side: an agent with its private limits, an API key's label, the ACP
target and the agent's listing in the arbiter's directory.

Stored limits never render into a page: a floor price saved once goes into the vault and is
never shown again. What the owner typed in a request that comes back (an error, a preview) is
rendered back as typed, so nothing has to be typed twice; a save keeps every sealed limit the
form did not change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.db.models import QuerySet

from arbiter_app.models import HandoffTarget, Listing
from oanp.agents.pricelist import (
    MAX_ITEM_KEY_CHARS,
    MAX_PRICE_ROWS,
    PriceLimits,
    PriceList,
    read_amount,
)
from oanp.agents.strategies import STRATEGIES
from oanp.agents.tradeoffs import (
    MAX_WEIGHT,
    WANT_SYNTAX,
    IssueLimits,
    TermsVault,
    read_want,
    read_weight,
)
from oanp.wire import discovery
from oanp.wire.canonical import read_json
from oanp.wire.envelope import IDENTIFIER_RULE, MAX_ITEM_BYTES, is_identifier
from oanp.wire.errors import ProtocolError, SchemaInvalid
from oanp.wire.money import MINOR_UNITS
from oanp.wire.terms import MAX_ISSUES
from sessions_app import services
from sessions_app.models import Merchant, Mode
from sessions_app.strategy_forms import TacticsFields


def sentence(message: str) -> str:
    """A refusal of the pure core (``"the floor must be a number"``) as a form shows it."""
    return f"{message[:1].upper()}{message[1:]}."


def _amount(label: str) -> forms.CharField:
    """An amount, read against its row's currency (:func:`oanp.agents.pricelist.read_amount`)."""
    return forms.CharField(
        label=label,
        max_length=32,
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "inputmode": "decimal", "size": 10}),
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
    #: :func:`sessions_app.services.vault_version` of the limits the form was built on.
    limits_version = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    items_only = forms.BooleanField(
        label="Negotiate only the items priced here",
        required=False,
        help_text="A session for an item without a row of its own in the session's currency is "
        "declined at once. Unticked, the currency's 'any item' row prices every other item.",
    )
    terms = forms.CharField(
        label="Limits on each issue",
        required=False,
        # Room for every issue with the longest options, and no more to parse.
        max_length=MAX_ISSUES * 200,
        strip=False,
        widget=forms.Textarea(
            attrs={"rows": 4, "cols": 60, "spellcheck": "false", "autocomplete": "off"}
        ),
        help_text=f"One issue a line, as {WANT_SYNTAX}: the agent's best value, the worst it "
        "accepts, and how much the issue matters beside the price (no weight: 1). Two numbers "
        "for a number issue, as delivery_days=20..3@0.5 (best 20 days, at worst 3); two "
        "options for a choice, as support=none..standard@2 (an option holding .. or @ as a JSON "
        'string, as "24/7 @ phone"). An issue the buyer declares that '
        "is not named here is one the agent takes as the buyer offers it. Left empty, the "
        "sealed limits on issues stay as they are.",
    )
    clear_terms = forms.BooleanField(
        label="Remove the sealed limits on issues",
        required=False,
        help_text="The agent then takes every issue a buyer declares as the buyer offers it.",
    )
    price_weight = forms.CharField(
        label="Price weight",
        required=False,
        max_length=32,
        widget=forms.NumberInput(
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
        merchants: QuerySet[Merchant] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.creating = creating
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
        return [
            "limits_version",
            "items_only",
            "terms",
            "clear_terms",
            "price_weight",
            *self.tactics_field_names,
        ]

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
        if issues and data.get("clear_terms"):
            self.add_error(
                "clear_terms", "Either type new limits on issues or remove them, not both."
            )
        return data


LIMITS_CHANGED = "The limits changed since this page was loaded: reload it and edit again."


class PriceRowForm(forms.Form):
    """One row of the agent's price list. A stored row shows its item and currency (not
    limits) and is named by ``was``; its floor and ideal come in empty and, left empty, keep
    what is sealed. A new row needs a currency, a floor and an ideal; no item is any item.

    Amounts typed are rendered back when the form returns with an error or a preview (they
    were typed in this very request); stored amounts never reach the page.
    """

    was = forms.CharField(required=False, widget=forms.HiddenInput)
    item = forms.CharField(
        label="Item sku, id or route", max_length=MAX_ITEM_KEY_CHARS, required=False, strip=True
    )
    currency = forms.CharField(
        label="Currency",
        max_length=8,
        required=False,
        strip=True,
        widget=forms.TextInput(attrs={"size": 4, "autocapitalize": "characters"}),
    )
    floor_price = _amount("Floor")
    ideal_price = _amount("Ideal")
    remove = forms.BooleanField(label="Remove", required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.stored_key is not None:
            for name in ("floor_price", "ideal_price"):
                self.fields[name].widget.attrs["placeholder"] = "sealed"

    @property
    def stored_key(self) -> tuple[str | None, str] | None:
        """The (item, currency) of the stored row this row edits, or ``None`` for a new one
        (or a ``was`` that names no row at all, which :class:`BasePriceRowFormSet` refuses)."""
        was = (
            self.initial.get("was") if not self.is_bound else self.data.get(self.add_prefix("was"))
        )
        return _row_key(was)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        key = self.stored_key
        if data.get("was") and key is None:
            self.add_error(None, LIMITS_CHANGED)  # not a row the page wrote
            return data
        floor, ideal = data.get("floor_price", ""), data.get("ideal_price", "")
        if key is None:
            if not any(
                data.get(name) for name in ("item", "currency", "floor_price", "ideal_price")
            ):
                data["row"] = "keep"  # an empty row adds nothing
                return data
            currency = data.get("currency", "").upper()
            if not currency:
                self.add_error("currency", "Name the currency of these limits, as USD.")
                return data
            if currency not in MINOR_UNITS:
                self.add_error("currency", f"{currency[:8]} is not an ISO 4217 currency code.")
                return data
            key = (data.get("item") or None, currency)
            if not floor or not ideal:
                self.add_error(None, "Enter both the floor and the ideal price.")
                return data
        elif data.get("remove") or not (floor or ideal):
            data["row"] = None if data.get("remove") else "keep"
            return data
        elif not floor or not ideal:
            self.add_error(None, "Enter both a new floor and a new ideal, or neither to keep them.")
            return data
        amounts = {}
        for name, what in (("floor_price", "the floor"), ("ideal_price", "the ideal price")):
            try:
                amounts[name] = read_amount(data[name], what, key[1])
            except ValueError as bad:
                self.add_error(name, sentence(str(bad)))
        if len(amounts) == 2:
            if amounts["floor_price"] > amounts["ideal_price"]:
                self.add_error("floor_price", "The floor cannot be above the ideal price.")
            else:
                data["row"] = PriceLimits(key[0], key[1], **amounts)
        return data


#: Longer than any ``was`` the page writes (an item key, a currency, JSON punctuation).
_MAX_WAS_CHARS = MAX_ITEM_KEY_CHARS * 6 + 32


def _row_key(was: object) -> tuple[str | None, str] | None:
    """The (item, currency) a stored row's ``was`` names, as the page wrote it; ``None`` for
    nothing, or for anything the page would not have written."""
    if not isinstance(was, str) or not was or len(was) > _MAX_WAS_CHARS:
        return None
    try:
        named = json.loads(was)
    except ValueError:
        return None
    if not (isinstance(named, list) and len(named) == 2):
        return None
    item, currency = named
    if not (item is None or isinstance(item, str)) or not (
        isinstance(currency, str) and currency in MINOR_UNITS
    ):
        return None
    return item or None, currency


class BasePriceRowFormSet(forms.BaseFormSet):  # type: ignore[type-arg]
    def __init__(self, *args: Any, stored: PriceList | None = None, **kwargs: Any) -> None:
        self.stored = stored
        if stored is not None and not kwargs.get("data") and not args and "initial" not in kwargs:
            kwargs["initial"] = [
                {
                    "was": json.dumps([row.item, row.currency]),
                    "item": row.item or "",
                    "currency": row.currency,
                }
                for row in stored.limits
            ]
        super().__init__(*args, **kwargs)

    def clean(self) -> None:
        """``rows``: the stored rows, each kept unless this post changed or removed it, then
        the new ones; a new row naming a stored row's item and currency replaces it."""
        if any(self.errors):
            return
        rows = {row.key: row for row in (self.stored.limits if self.stored else ())}
        touched: set[tuple[str | None, str]] = set()
        for form in self.forms:
            key, outcome = form.stored_key, form.cleaned_data.get("row", "keep")
            if key is not None and key not in rows:
                raise forms.ValidationError(LIMITS_CHANGED)
            if outcome == "keep":
                continue
            key = key if outcome is None else outcome.key
            if key in touched:
                item, currency = key
                raise forms.ValidationError(
                    f"{'Any item' if item is None else item} in {currency} is given two rows: "
                    "keep one."
                )
            touched.add(key)
            if outcome is None:
                del rows[key]
            else:
                rows[key] = outcome
        self.rows = tuple(rows.values())


PriceRowFormSet = forms.formset_factory(
    PriceRowForm,
    formset=BasePriceRowFormSet,
    extra=3,
    # A post of more rows than a price list holds is refused as the form's error, not read.
    max_num=MAX_PRICE_ROWS,
    absolute_max=MAX_PRICE_ROWS + 3,
    validate_max=True,
)


def as_typed(form: forms.BaseForm) -> dict[str, Any]:
    """What was typed into each field of a bound ``form``, read without checking it."""
    return {name: form[name].value() for name in form.fields}


def one_more_row(posted: Mapping[str, Any], stored: PriceList | None) -> BasePriceRowFormSet:
    """The rows as they were typed and an empty one after them (while a price list has room),
    unchecked: asking for a row is not asking whether the half-typed ones are right."""
    typed = PriceRowFormSet(posted, prefix="limits", stored=stored)
    rows = [as_typed(row) for row in typed.forms[:MAX_PRICE_ROWS]]
    more = PriceRowFormSet(prefix="limits", stored=stored, initial=rows)
    more.extra = 1 if len(rows) < MAX_PRICE_ROWS else 0
    return more


def limits_from(
    form: AgentForm, rows: BasePriceRowFormSet, stored: PriceList | None
) -> PriceList | None:
    """The price list as the form leaves it: the stored rows kept, changed or removed, the
    new ones added, the terms replaced only when typed (or cleared when asked); ``None`` when
    nothing changed, so the sealed limits stay exactly as they are."""
    data = form.cleaned_data
    terms = stored.terms if stored is not None else None
    if data.get("terms_vault") is not None:
        terms = data["terms_vault"]
    elif data.get("clear_terms"):
        terms = None
    try:
        prices = PriceList(rows.rows, bool(data.get("items_only")), terms)
    except ValueError as refused:  # more rows than a price list holds
        form.add_error(None, sentence(str(refused)))
        return None
    if prices == stored or (stored is None and not prices.limits and terms is None):
        return None
    if prices.items_only and any(row.item is None for row in prices.limits):
        form.add_error(
            "items_only",
            "An agent that negotiates only the items it priced never uses an 'any item' row: "
            "give each row its item, or untick this.",
        )
    return prices


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
    """A refusal of :func:`oanp.wire.discovery.parse_listing` as the form shows it: a catalog item
    by its place in the list, counted from 1."""
    found = _CATALOG_ITEM.fullmatch(field)
    if found is None:
        return sentence(message)
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
        help_text="ISO 4217 codes, separated by spaces or commas: USD, EUR. A hosted agent is "
        "listed in those it holds limits in, so buyers' agents pick one it negotiates in.",
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


def listing_initial(listing: Listing | None, chosen: list[str]) -> dict[str, Any]:
    """The listing form as the agent's listing stands, with the currencies its owner chose
    (the directory shows those it holds limits in), the catalog indented for editing."""
    if listing is None:
        return {}
    catalog = json.loads(listing.catalog)
    return {
        "listed": listing.listed,
        "description": listing.description,
        "currencies": ", ".join(chosen or listing.currencies),
        "catalog": json.dumps(catalog, indent=2, ensure_ascii=False) if catalog else "",
    }
