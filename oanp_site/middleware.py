"""Django's standard middleware, run synchronously.

Django's own middleware classes can run either way, and under ASGI they run "async": each
one then hops to a worker thread and back for its request and response halves, some fourteen
thread switches per request for seven classes. Declared sync-only, the whole chain runs in
the one worker thread that serves the view, which is where this project's views run anyway.
"""

from __future__ import annotations

from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.messages.middleware import MessageMiddleware as _Message
from django.contrib.sessions.middleware import SessionMiddleware as _Session
from django.middleware.clickjacking import XFrameOptionsMiddleware as _XFrameOptions
from django.middleware.common import CommonMiddleware as _Common
from django.middleware.csrf import CsrfViewMiddleware as _CsrfView
from django.middleware.security import SecurityMiddleware as _Security
from whitenoise.middleware import WhiteNoiseMiddleware as _WhiteNoise


class SecurityMiddleware(_Security):
    async_capable = False


class SessionMiddleware(_Session):
    async_capable = False


class CommonMiddleware(_Common):
    async_capable = False


class CsrfViewMiddleware(_CsrfView):
    async_capable = False


class AuthenticationMiddleware(_Authentication):
    async_capable = False


class MessageMiddleware(_Message):
    async_capable = False


class XFrameOptionsMiddleware(_XFrameOptions):
    async_capable = False


class WhiteNoiseMiddleware(_WhiteNoise):
    async_capable = False
