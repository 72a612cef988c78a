"""Where the site's mail (password resets) goes, read from the environment.

``EMAIL_URL`` says it in one variable, as ``DATABASE_URL`` does for the database:

- ``smtp://user:password@host:587/?tls=1``: SMTP with STARTTLS (``ssl=1`` for TLS from the
  first byte, which ``smtps://`` also means; ``timeout=`` in seconds);
- ``console://``: printed on the server's standard output (a development machine);
- ``locmem://``: kept in memory (tests).

The user and password are percent-decoded, so a password may hold ``@`` or ``/`` written as
``%40`` and ``%2F``. Without ``EMAIL_URL``, Django's own variables are read one by one
(``EMAIL_HOST``, ``EMAIL_PORT``, ``EMAIL_HOST_USER``, ``EMAIL_HOST_PASSWORD``,
``EMAIL_USE_TLS``, ``EMAIL_USE_SSL``); with neither, a development machine prints its mail and a
production one sends it to an SMTP server on this machine, Django's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_BACKENDS = {
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
    "smtps": "django.core.mail.backends.smtp.EmailBackend",
    "console": "django.core.mail.backends.console.EmailBackend",
    "locmem": "django.core.mail.backends.locmem.EmailBackend",
}
_TRUE = frozenset({"1", "true", "yes", "on"})
#: An SMTP server that stops answering must not hold a request's thread for good.
DEFAULT_TIMEOUT_SECONDS = 10


def _flag(value: str | None) -> bool:
    return (value or "").lower() in _TRUE


def from_url(url: str) -> dict[str, Any]:
    """Django's email settings for ``url`` (see the module's docstring)."""
    parts = urlsplit(url)
    backend = _BACKENDS.get(parts.scheme)
    if backend is None:
        raise ImproperlyConfigured(
            f"EMAIL_URL's scheme {parts.scheme!r} is none of {', '.join(sorted(_BACKENDS))}"
        )
    if parts.scheme not in {"smtp", "smtps"}:
        return {"EMAIL_BACKEND": backend}
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    use_ssl = parts.scheme == "smtps" or _flag(query.get("ssl"))
    use_tls = _flag(query.get("tls"))
    if use_ssl and use_tls:
        # Django refuses the pair only when the first mail is sent; the start is the place.
        raise ImproperlyConfigured("EMAIL_URL asks for both tls and ssl; choose one")
    try:
        port = parts.port or (465 if use_ssl else 25)
        timeout = int(query.get("timeout", DEFAULT_TIMEOUT_SECONDS))
    except ValueError as error:
        raise ImproperlyConfigured(f"EMAIL_URL: {error}") from None
    return {
        "EMAIL_BACKEND": backend,
        "EMAIL_HOST": parts.hostname or "localhost",
        "EMAIL_PORT": port,
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_TLS": use_tls,
        "EMAIL_USE_SSL": use_ssl,
        "EMAIL_TIMEOUT": timeout,
    }


def from_environment(environ: Mapping[str, str], *, debug: bool) -> dict[str, Any]:
    """Django's email settings from ``EMAIL_URL``, else from its ``EMAIL_*`` variables."""
    if environ.get("EMAIL_URL"):
        return from_url(environ["EMAIL_URL"])
    if not environ.get("EMAIL_HOST") and debug:
        return {"EMAIL_BACKEND": _BACKENDS["console"]}
    return {
        "EMAIL_BACKEND": _BACKENDS["smtp"],
        "EMAIL_HOST": environ.get("EMAIL_HOST", "localhost"),
        "EMAIL_PORT": int(environ.get("EMAIL_PORT", "25")),
        "EMAIL_HOST_USER": environ.get("EMAIL_HOST_USER", ""),
        "EMAIL_HOST_PASSWORD": environ.get("EMAIL_HOST_PASSWORD", ""),
        "EMAIL_USE_TLS": _flag(environ.get("EMAIL_USE_TLS")),
        "EMAIL_USE_SSL": _flag(environ.get("EMAIL_USE_SSL")),
        "EMAIL_TIMEOUT": DEFAULT_TIMEOUT_SECONDS,
    }
