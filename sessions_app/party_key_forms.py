"""The forms of an agent's signing keys: a public JWK to register, pasted or uploaded as a file,
and the switch that requires every envelope of the agent signed.

A key is read and judged here, as the arbiter's API judges one (:func:`registrable_key`), so
the page says what is wrong before anything is asked of the arbiter. What was pasted is never
rendered back: it may be a private key, which no page, cache or browser history should keep.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from oanp.wire.canonical import read_json
from oanp.wire.errors import BadPartyKey, PrivateKeySent, ProtocolError
from oanp.wire.party_signatures import registrable_key
from sessions_app.forms import sentence

#: Far more than any public Ed25519 or P-256 JWK (about 200 bytes), and all a form reads.
MAX_JWK_BYTES = 4096

PRIVATE_KEY = "This is a private key: paste the public key only. Nothing was stored."
KEY_FILE_TYPES = ".jwk,.json,application/json,application/jwk+json"


class UnechoedTextarea(forms.Textarea):
    """A textarea that comes back empty after an error, as a password field does."""

    def format_value(self, value: Any) -> str | None:
        return None


class PartyKeyForm(forms.Form):
    jwk = forms.CharField(
        label="Public key (JWK)",
        required=False,
        max_length=MAX_JWK_BYTES,
        widget=UnechoedTextarea(
            attrs={
                "rows": 4,
                "cols": 60,
                "spellcheck": "false",
                "autocomplete": "off",
                "placeholder": '{"kty": "OKP", "crv": "Ed25519", "x": "…"}',
            }
        ),
        help_text="One public JWK: OKP Ed25519 or EC P-256, as the agent's signing library "
        "exports it. Never the private key.",
    )
    jwk_file = forms.FileField(
        label="Or a key file",
        required=False,
        widget=forms.FileInput(attrs={"accept": KEY_FILE_TYPES}),
        help_text="A .jwk or .json file holding the public JWK.",
    )

    def clean_jwk_file(self) -> str:
        upload: UploadedFile | None = self.cleaned_data["jwk_file"]
        if upload is None:
            return ""
        if upload.size is not None and upload.size > MAX_JWK_BYTES:
            raise forms.ValidationError(
                f"This file holds {upload.size} bytes; a public JWK is a few hundred: choose "
                "the key's .jwk or .json file."
            )
        try:
            # A byte-order mark is what some editors start a saved UTF-8 file with.
            return upload.read(MAX_JWK_BYTES + 1).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError(
                "This file is not text: choose the key's .jwk or .json file."
            ) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        pasted, uploaded = data["jwk"], data["jwk_file"]
        if pasted and uploaded:
            self.add_error(None, "Paste a key or choose a file, not both.")
            return data
        if not (pasted or uploaded):
            self.add_error("jwk", "Paste a public JWK, or choose a .jwk or .json file.")
            return data
        where = "jwk_file" if uploaded else "jwk"
        try:
            jwk = read_json(uploaded or pasted)
        except ProtocolError as exc:
            why = exc.__cause__ if isinstance(exc.__cause__, ValueError) else exc.detail
            self.add_error(where, f"This is not valid JSON: {why}.")
            return data
        try:
            registrable_key(jwk)
        except PrivateKeySent:
            self.add_error(where, PRIVATE_KEY)
        except BadPartyKey as refused:
            self.add_error(where, sentence(refused.detail))
        else:
            data["key"] = jwk
        return data


class SignaturesRequiredForm(forms.Form):
    """The switch: posts the state it turns the requirement to."""

    required = forms.BooleanField(required=False)
