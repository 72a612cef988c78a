"""System checks that stop a production start on development secrets, and on a transparency
log whose origin or witnesses are misconfigured (:func:`transparency_log`).

With ``DEBUG`` off, the public development secret key would let anyone sign sessions and
cookies, and keys derived from it would keep signing keys and merchants' vaults under a secret
everyone knows. Errors stop ``migrate``, ``runserver``, ``check`` and every other command that
runs the checks, and :func:`refuse_to_start` stops the processes that run none of their own
(Daphne, the Celery worker and beat); a development machine sets ``DJANGO_DEBUG=1`` (or
``OANP_DEVELOPMENT=1``, as ``make demo`` does).
"""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured

from oanp.tlog.note import is_key_name
from oanp.tlog.witness import parse_witness_lines

#: The id of each key's error.
_KEY_VARIABLES = {"OANP_KEY_ENCRYPTION_KEY": "E002", "OANP_VAULT_KEY": "E003"}
_DEVELOPMENT = "on a development machine, set DJANGO_DEBUG=1 instead"


def production_secrets(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Registered by the arbiter's app (``arbiter_app.apps``), with Django's security checks."""
    if settings.DEVELOPMENT:
        return []
    errors: list[CheckMessage] = []
    if not settings.SECRET_KEY or settings.SECRET_KEY == settings.DEVELOPMENT_SECRET_KEY:
        errors.append(
            Error(
                "DJANGO_SECRET_KEY is unset (the public development key is in use) and "
                "DEBUG is off.",
                hint="Set DJANGO_SECRET_KEY to a long random value; " + _DEVELOPMENT + ".",
                id="oanp.E001",
            )
        )
    for name, number in _KEY_VARIABLES.items():
        if name in settings.OANP_DERIVED_KEYS:
            problem = f"{name} is unset (derived from the secret key) and DEBUG is off."
        elif not _is_fernet_key(getattr(settings, name)):
            problem = f"{name} is not a Fernet key."
        else:
            continue
        errors.append(
            Error(
                problem,
                hint=(
                    f"Set {name} to a key of its own, made with "
                    '`python -c "from cryptography.fernet import Fernet; '
                    'print(Fernet.generate_key().decode())"`, and keep it: what it encrypted '
                    "cannot be read without it; " + _DEVELOPMENT + "."
                ),
                id=f"oanp.{number}",
            )
        )
    return errors


def transparency_log(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The log's origin names its key, and every ``OANP_WITNESSES`` line is a witness: a
    mistake here would otherwise show only when the first checkpoint is signed or sent."""
    errors: list[CheckMessage] = []
    if not is_key_name(settings.OANP_LOG_ORIGIN):
        errors.append(
            Error(
                f"OANP_LOG_ORIGIN {settings.OANP_LOG_ORIGIN!r} is not a C2SP key name.",
                hint="Use a scheme-less URL with no spaces or '+', like arbiter.example/log.",
                id="oanp.E004",
            )
        )
    try:
        parse_witness_lines(settings.OANP_WITNESSES)
    except ValueError as exc:
        errors.append(
            Error(
                f"OANP_WITNESSES: {exc}",
                hint="One witness a line: its cosignature verifier key (as `oanp witness "
                "keygen` prints it), a space, and its URL.",
                id="oanp.E005",
            )
        )
    return errors


def _is_fernet_key(value: str) -> bool:
    try:
        Fernet(value)
    except (ValueError, TypeError):
        return False
    return True


def refuse_to_start() -> None:
    """Raise :class:`ImproperlyConfigured`, naming every error, when the secrets are unsafe."""
    errors = production_secrets()
    if errors:
        raise ImproperlyConfigured(
            "refusing to start: "
            + " ".join(f"{error.id}: {error.msg} {error.hint}" for error in errors)
        )
