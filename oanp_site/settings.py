"""One settings module for every environment; the environment switches it."""

import base64
import hashlib
import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from oanp_site import connections, mail, serve
from oanp_site.forwarded import proxy_hops
from oanp_site.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent

# Public, so good for a development machine only: with DEBUG off it stops every start
# (oanp_site.checks).
DEVELOPMENT_SECRET_KEY = "django-insecure-dev-only-change-me"  # noqa: S105
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or DEVELOPMENT_SECRET_KEY
DEBUG = os.environ.get("DJANGO_DEBUG", "").lower() in {"1", "true", "yes", "on"}
# A development machine: it may run on the development secrets, asks no second factor by
# default and prints its mail. DJANGO_DEBUG=1 makes one; so does OANP_DEVELOPMENT=1 with DEBUG
# off, as `make demo`'s processes run, so that its visitors meet the site's own error pages
# rather than Django's technical ones (whose tracebacks are in its server's log all the same).
DEVELOPMENT = DEBUG or os.environ.get("OANP_DEVELOPMENT", "").lower() in {"1", "true", "yes", "on"}
# Without DJANGO_ALLOWED_HOSTS the server answers on this machine only.
ALLOWED_HOSTS = [
    h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h
]

INSTALLED_APPS = [
    # daphne first: its runserver serves the ASGI application, SSE included.
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "django_celery_beat",
    # The dashboard's second factor: authenticator apps (TOTP) and recovery codes.
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "oanp_site.apps.SiteConfig",
    "arbiter_app",
    "sessions_app",
]

MIDDLEWARE = [
    # First, so it times and logs every answer, refusals of the guard included.
    "oanp_site.middleware.RequestLogMiddleware",
    # Next, so that every answer carries its Content-Security-Policy, the guard's refusals too.
    "oanp_site.middleware.ContentSecurityPolicyMiddleware",
    # Before anything reads the request: no NUL or lone surrogate reaches the database.
    "arbiter_app.guards.InvalidCharactersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Whether this session's sign-in took a code; then whether the person must give one or set
    # up an app before going on.
    "django_otp.middleware.OTPMiddleware",
    "sessions_app.second_factor.SecondFactorMiddleware",
    "sessions_app.web_sessions.IdleTimeoutMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A database that is away answers 503 with Retry-After, not 500.
    "arbiter_app.problems.UnavailableMiddleware",
]

ROOT_URLCONF = "oanp_site.urls"
WSGI_APPLICATION = "oanp_site.wsgi.application"
ASGI_APPLICATION = "oanp_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sessions_app.context_processors.worker_outage",
                "sessions_app.context_processors.scope",
            ],
        },
    },
]

# SQLite needs its directory to exist; var/ is local state, never committed.
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

# With no DATABASE_URL the embedded default is SQLite, so `migrate` and `daphne` just work.
DATABASE_URL = os.environ.get("DATABASE_URL", "")
# The tables' owner, when the application connects as a role of its own: `migrate --database
# owner` runs as it and then grants DATABASE_URL's role only what the code needs
# (arbiter_app.db_privileges). Without it the application owns its tables and can undo the
# log's guards.
DATABASE_OWNER_URL = os.environ.get("DATABASE_OWNER_URL", "")
# DATABASE_URL names PgBouncer in transaction mode, which bounds the server's connections
# itself (docs/scaling.md, Connections).
OANP_DB_TRANSACTION_POOLER = os.environ.get("OANP_DB_TRANSACTION_POOLER", "").lower() in {
    "1",
    "true",
    "yes",
    "on",
}
# What the deployment's processes may hold on PostgreSQL; none on SQLite, which has no pool.
OANP_DB_BUDGET: connections.Budget | None = None
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Every process of the deployment pools its own connections out of one share of the
        # server's max_connections (oanp_site.connections); /readyz compares the sum with it.
        _PROCFILE = BASE_DIR / "Procfile"
        OANP_DB_BUDGET = connections.from_environment(
            os.environ,
            serve.concurrency(),
            _PROCFILE.read_text() if _PROCFILE.exists() else "",
        )
        # Under ASGI every request runs in its own thread; a pool shares connections between
        # them instead of opening one per request.
        DATABASES["default"]["OPTIONS"] = {
            "pool": {
                # One opened up front: beat, and each process of a prefork worker (whose pool
                # Celery closes after every task), never use more.
                "min_size": 1,
                # A web process's; a worker sizes its own to its task slots (arbiter_app.pools).
                "max_size": OANP_DB_BUDGET.web_pool,
                # A request waits this long for a connection, then gets 503 and Retry-After:
                # with the database away, requests fail fast instead of piling up.
                "timeout": float(os.environ.get("OANP_DB_POOL_TIMEOUT", "3")),
            },
            # Bounds each new connection's attempt when the server does not answer at all.
            "connect_timeout": int(os.environ.get("OANP_DB_CONNECT_TIMEOUT", "3")),
        }
        # A connection broken while the database was away is found when taken from the pool
        # and replaced, so the first requests after a restart succeed.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
        # Behind PgBouncer in transaction mode a cursor cannot outlive its transaction.
        # Prepared statements need nothing here: Django turns psycopg's off unless told to.
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = OANP_DB_TRANSACTION_POOLER
    if DATABASE_OWNER_URL:
        # Same database, another login; under tests, the same test database.
        DATABASES["owner"] = {
            **dj_database_url.parse(DATABASE_OWNER_URL),
            "TEST": {"MIRROR": "default"},
        }
elif DATABASE_OWNER_URL:
    raise ImproperlyConfigured("DATABASE_OWNER_URL needs DATABASE_URL, the application's role")
else:
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "db.sqlite3"}
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default, or a sqlite:/// DATABASE_URL: the web process, the worker's threads
    # and beat all write to one file. IMMEDIATE takes the write lock at BEGIN, so two writers
    # queue (up to the timeout) instead of one failing at upgrade time: SQLite's stand-in for
    # SELECT ... FOR UPDATE. A connection must not write while a read of its own is still
    # open, though: SQLite refuses that at once when another writer waits (sessions_app.exports
    # reads in whole batches for this reason).
    DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 20}

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # The cache holds only rate-limit counters: when Redis hangs, a request waits a
            # second for it at most, then counts on its own (arbiter_app.limits).
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "oanp_site.channel_layer.RedisLayer",
            # A receive blocks in BZPOPMIN for channels_redis's 5 s; redis-py's own default
            # socket timeout is also 5 s, so a receive could time out at its own end and kill
            # the consumer waiting on it. The socket waits longer than the block.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}]},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# Daphne serves the dashboard's files itself, straight from static/, no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
MEDIA_ROOT = VAR_DIR / "media"

# How long an invitation's link opens the page that sets the invited person's password.
OANP_INVITATION_HOURS = float(os.environ.get("OANP_INVITATION_HOURS", "72"))

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"
# A dashboard session ends after this long without a page, in the database as in the cookie:
# each page moves its end on (sessions_app.web_sessions.IdleTimeoutMiddleware).
OANP_SESSION_IDLE_SECONDS = int(os.environ.get("OANP_SESSION_IDLE_SECONDS", "1800"))
SESSION_COOKIE_AGE = OANP_SESSION_IDLE_SECONDS
# A password-reset link works once, and within this long of being mailed.
PASSWORD_RESET_TIMEOUT = int(os.environ.get("OANP_PASSWORD_RESET_SECONDS", "3600"))
# Operators and admins, who see every merchant's sessions, sign in with a second factor: one
# without it is sent to set it up first (sessions_app.second_factor). On but on a development
# machine.
OANP_REQUIRE_2FA = os.environ.get("OANP_REQUIRE_2FA", "0" if DEVELOPMENT else "1").lower() in {
    "1",
    "true",
    "yes",
    "on",
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": ["arbiter_app.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "EXCEPTION_HANDLER": "arbiter_app.problems.exception_handler",
    # JSON whatever Accept says: a 406 would come before the 401 (docs/protocol.md §14.5).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "arbiter_app.api.negotiation.JsonAnyway",
    "UNAUTHENTICATED_USER": None,
    # JSON only: the browsable API's HTML page would be sent to a browser labelled with the
    # problem+json or JSON type its body does not have.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "OANP arbiter",
    "DESCRIPTION": "The OANP v0.1 protocol endpoints of a neutral negotiation arbiter.",
    "VERSION": "0.1",
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "arbiter_app.api.openapi.add_streams",
    ],
}

# The arbiter's identity as it appears in every arbiter envelope and signed agreement.
OANP_ARBITER_ID = os.environ.get("OANP_ARBITER_ID", "arbiter.local")
# Where agents and auditors reach this server; the agreement's jwks_uri is built from it.
OANP_PUBLIC_URL = os.environ.get("OANP_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")

# Mail (invitations, password resets): EMAIL_URL or Django's EMAIL_* variables
# (oanp_site.mail), whose settings differ by backend, hence set by name.
globals().update(mail.from_environment(os.environ, debug=DEVELOPMENT))
DEFAULT_FROM_EMAIL = os.environ.get(
    "DEFAULT_FROM_EMAIL", f"OANP arbiter <noreply@{urlsplit(OANP_PUBLIC_URL).hostname}>"
)
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# How authenticator apps name this deployment's accounts, apart from another's.
OTP_TOTP_ISSUER = f"OANP arbiter {urlsplit(OANP_PUBLIC_URL).hostname}"

OANP_SIGNING_ALG = os.environ.get("OANP_SIGNING_ALG", "Ed25519")
# Fernet key that encrypts signing keys at rest. Derived from SECRET_KEY when unset, which is
# only good enough for a development machine: with DEBUG off, an unset one stops every start.
OANP_KEY_ENCRYPTION_KEY = (
    os.environ.get("OANP_KEY_ENCRYPTION_KEY")
    or base64.urlsafe_b64encode(
        hashlib.sha256(b"oanp-signing-keys:" + SECRET_KEY.encode()).digest()
    ).decode()
)
# Fernet key of merchants' vaults (private limits), apart from the arbiter's keys on purpose.
OANP_VAULT_KEY = (
    os.environ.get("OANP_VAULT_KEY")
    or base64.urlsafe_b64encode(
        hashlib.sha256(b"oanp-merchant-vaults:" + SECRET_KEY.encode()).digest()
    ).decode()
)
#: The keys above that were derived, not set (oanp_site.checks refuses them with DEBUG off).
OANP_DERIVED_KEYS = [
    k for k in ("OANP_KEY_ENCRYPTION_KEY", "OANP_VAULT_KEY") if not os.environ.get(k)
]

# Security ------------------------------------------------------------------------------------
# Always on: cookies out of scripts' reach, no MIME sniffing, no framing, no referrer abroad.
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# The Content-Security-Policy of every page (oanp_site.middleware): scripts, styles, images,
# fonts and connections from this origin only ('self' covers WebSockets to the same host and
# port, CSP Level 3), and nothing inline: no <script> or <style> element with code in it, no
# style="…", no onclick="…". A data: image is the favicon. No plugin, no <base>, forms post
# here only, no page frames one of ours. Directives as Django 6.0's SECURE_CSP writes them.
OANP_CSP_PAGES = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
# Every other answer (JSON, problem+json, event streams, downloads) loads nothing and is shown
# in no frame, whatever a browser makes of it.
OANP_CSP_OTHER = {"default-src": ["'none'"], "frame-ancestors": ["'none'"]}
# Behind a TLS-terminating proxy (production): plain HTTP is redirected to HTTPS, browsers are
# told to use HTTPS only (HSTS, subdomains included), cookies travel over HTTPS only. The proxy
# must set X-Forwarded-Proto (and drop a client's own): it is how a request says it came over
# HTTPS. The probes are exempt from the redirect, for a load balancer that checks over HTTP.
OANP_BEHIND_TLS = os.environ.get("OANP_BEHIND_TLS", "").lower() in {"1", "true", "yes", "on"}
if OANP_BEHIND_TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^(healthz|readyz|metrics)$"]
    SECURE_HSTS_SECONDS = int(os.environ.get("OANP_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    # Preloading is a promise to browsers' built-in list, hard to take back: the operator's own
    # choice, so check --deploy's reminder of it (W021) is not shown.
    SECURE_HSTS_PRELOAD = os.environ.get("OANP_HSTS_PRELOAD", "").lower() in {"1", "true", "yes"}
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # Forms posted from the public address pass CSRF's origin check behind the proxy.
    CSRF_TRUSTED_ORIGINS = [OANP_PUBLIC_URL] if OANP_PUBLIC_URL.startswith("https://") else []

# How many proxies in front of the server append to X-Forwarded-For: the client is the address
# this many entries from its right (oanp_site.forwarded); 0 ignores the header. The older
# spellings true/yes/on mean 1; anything else stops the start.
OANP_PROXY_HEADERS = proxy_hops(os.environ.get("OANP_PROXY_HEADERS"))

# Envelopes per API key and minute: generous for a busy agent, stops a runaway loop.
OANP_RATE_LIMIT_PER_MINUTE = int(os.environ.get("OANP_RATE_LIMIT_PER_MINUTE", "600"))
# Failed authentications per client address and minute; past it the address gets 429 before
# its key is looked up, so a flood of made-up keys costs no database query.
OANP_AUTH_FAILURES_PER_MINUTE = int(os.environ.get("OANP_AUTH_FAILURES_PER_MINUTE", "120"))
# Event streams re-check their key this often (and at once on a revocation), so a revoked key
# stops reading within seconds even if the revocation's wake-up is lost.
OANP_STREAM_RECHECK_SECONDS = float(os.environ.get("OANP_STREAM_RECHECK_SECONDS", "5"))
#: How long a request's headers may take to arrive, from their first line (oanp_site.transport).
OANP_HEADER_TIMEOUT_SECONDS = float(os.environ.get("OANP_HEADER_TIMEOUT_SECONDS", "20"))
#: How long a process trusts an API key it found live (arbiter_app.credential_cache); a
#: revocation elsewhere is honoured within it. 0 looks every key up on every request.
OANP_CREDENTIAL_CACHE_SECONDS = float(os.environ.get("OANP_CREDENTIAL_CACHE_SECONDS", "1"))
# Streams one key may hold open at once in each server process (429 beyond): an agent needs its
# inbox and a few sessions; hundreds from one key only slow everyone else's.
OANP_STREAMS_PER_KEY = int(os.environ.get("OANP_STREAMS_PER_KEY", "20"))
# Streams one server process holds open at once, all keys together (503 beyond, so a client
# retries, perhaps on another process): an idle stream reads nothing, but each holds a socket,
# two channel-layer groups and some memory.
OANP_STREAMS_PER_PROCESS = int(os.environ.get("OANP_STREAMS_PER_PROCESS", "1000"))

# Background work: Celery with Redis as the broker. Without REDIS_URL, a broker that keeps its
# queue in files under var/, so the embedded default needs no server and timers still fire.
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # kombu's Redis transport, made to outlive a Redis restart (see its module).
    CELERY_BROKER_TRANSPORT = "oanp_site.redis_broker:Transport"
else:
    # The file transport ignores the host; naming one keeps kombu from warning that it is missing.
    CELERY_BROKER_URL = "filesystem://localhost/"
    # kombu's file transport, made safe for a worker and producers at once (see its module).
    CELERY_BROKER_TRANSPORT = "oanp_site.broker:Transport"
    _QUEUE_DIR = Path(os.environ.get("OANP_BROKER_DIR") or VAR_DIR / "celery")
    for _folder in ("queue", "claimed", "rejected", "control"):
        (_QUEUE_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_QUEUE_DIR / "queue"),
        "data_folder_out": str(_QUEUE_DIR / "queue"),
        # Beside the queue, on its file system, so that taking a message is one atomic rename.
        "claimed_folder": str(_QUEUE_DIR / "claimed"),
        "rejected_folder": str(_QUEUE_DIR / "rejected"),
        "control_folder": str(_QUEUE_DIR / "control"),
        # The file queue is polled; the default second would show in every hosted answer.
        "polling_interval": 0.1,
    }
# Each kind of work has a queue of its own, consumed by workers of its own (the Procfile), so
# that no kind can hold up another: a merchant's slow checkout fills the deliveries' threads,
# never the timers'. Beat's heartbeat travels on every queue (CELERY_BEAT_SCHEDULE below), so
# /readyz knows each is served (docs/scaling.md, Queues).
OANP_QUEUES = ("timers", "hosted", "deliveries", "background")
# Declared, so that a worker started without -Q serves every one of them (the demo's does).
CELERY_TASK_QUEUES = [Queue(name, Exchange(name), routing_key=name) for name in OANP_QUEUES]
CELERY_TASK_DEFAULT_QUEUE = "background"
CELERY_TASK_ROUTES = {
    "arbiter_app.tasks.expire_session": {"queue": "timers"},
    "arbiter_app.tasks.sweep_timers": {"queue": "timers"},
    "arbiter_app.tasks.rearm_timers": {"queue": "timers"},
    "arbiter_app.tasks.deliver_handoff": {"queue": "deliveries"},
    "arbiter_app.tasks.deliver_callback": {"queue": "deliveries"},
    "arbiter_app.tasks.sweep_deliveries": {"queue": "deliveries"},
    # The log's integration is the database's work, quick, as the timers' is; asking its
    # witnesses to cosign is outbound requests, as the deliveries' are.
    "arbiter_app.tasks.integrate_log": {"queue": "timers"},
    "arbiter_app.tasks.cosign_checkpoint": {"queue": "deliveries"},
    "sessions_app.tasks.run_export": {"queue": "background"},
    # Hosted agents' answers, reveals and their sweeps.
    "sessions_app.tasks.*": {"queue": "hosted"},
}
CELERY_TASK_IGNORE_RESULT = True
# A task is acknowledged when it finished, and given back when its worker dies mid-way.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker tries a lost broker again every second or two, rather than Celery's growing steps,
# and for as long as it takes: Celery's 100 tries would then end a worker after 200 s.
CELERY_WORKER_CONSUMER = "oanp_site.celery:Consumer"
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"

# How often the sweep closes every session whose timer fell due: it backs up the task each
# timer schedules, and catches up after the worker was down.
OANP_TIMER_SWEEP_SECONDS = float(os.environ.get("OANP_TIMER_SWEEP_SECONDS", "30"))
# Timers due within this horizon get a task of their own at the due time; later ones wait for
# the sweep (a broker may hand a long-waiting task out twice).
OANP_TIMER_HORIZON_SECONDS = float(os.environ.get("OANP_TIMER_HORIZON_SECONDS", "900"))
if REDIS_URL:
    # A task a worker took and never acknowledged (the worker died) is handed out again after
    # this long; Redis's default is an hour. Above the horizon, the longest a worker may hold a
    # task (arbiter_app.queue sends none due later), so a held task is not handed out twice;
    # what the worker lost sooner, the sweeps and the re-arming of timers at each connection
    # (arbiter_app.timers) find in the database.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": OANP_TIMER_HORIZON_SECONDS + 60}
OANP_KEY_ROTATION_DAYS = float(os.environ.get("OANP_KEY_ROTATION_DAYS", "30"))
# How long a replaced key stays in the JWKS, for agents that cached it.
OANP_KEY_OVERLAP_DAYS = float(os.environ.get("OANP_KEY_OVERLAP_DAYS", "7"))

# Outbound deliveries: ACP handoffs to merchants and entry callbacks to agents.
# Targets on private, loopback or link-local addresses are refused (SSRF) unless this is on,
# which only a test or a single-machine setup should do.
OANP_ALLOW_PRIVATE_TARGETS = os.environ.get("OANP_ALLOW_PRIVATE_TARGETS", "").lower() in {
    "1",
    "true",
    "yes",
    "on",
}
# A failed delivery waits BASE, then twice as long each time, at most CAP per wait. With the
# defaults, 31 attempts span about a day (30 s … 1 h, then hourly), as docs/protocol.md §15 asks.
OANP_DELIVERY_RETRY_BASE_SECONDS = float(os.environ.get("OANP_DELIVERY_RETRY_BASE_SECONDS", "30"))
OANP_DELIVERY_RETRY_CAP_SECONDS = float(os.environ.get("OANP_DELIVERY_RETRY_CAP_SECONDS", "3600"))
OANP_DELIVERY_MAX_ATTEMPTS = int(os.environ.get("OANP_DELIVERY_MAX_ATTEMPTS", "31"))
OANP_DELIVERY_TIMEOUT_SECONDS = float(os.environ.get("OANP_DELIVERY_TIMEOUT_SECONDS", "10"))
# An attempt still unanswered this long after the timeout died with its worker: it is closed as
# abandoned and the next one may start. Well above the timeout, so a live attempt is never doubled.
OANP_DELIVERY_LEASE_MARGIN_SECONDS = float(
    os.environ.get("OANP_DELIVERY_LEASE_MARGIN_SECONDS", "60")
)
# The most attempts in flight at once to one target (scheme, host and port): a slow or hanging
# receiver holds that many of the delivery worker's threads, and the others' deliveries go on.
# An attempt beyond it waits a moment, not counted as a failure. At least one, or none would go.
OANP_DELIVERIES_PER_TARGET = max(1, int(os.environ.get("OANP_DELIVERIES_PER_TARGET", "2")))

# Health: how often each worker and beat say they are alive, and how long without a word before
# one counts as lost (/readyz answers 503, the dashboard shows a banner).
OANP_HEARTBEAT_SECONDS = float(os.environ.get("OANP_HEARTBEAT_SECONDS", "10"))
OANP_WORKER_LOST_SECONDS = float(os.environ.get("OANP_WORKER_LOST_SECONDS", "45"))
#: Where the Procfile's supervisor (oanp_site.procfile) keeps its processes' restarts, which
#: /readyz reports; it sets this for the processes it starts.
OANP_PROCESSES_FILE = os.environ.get("OANP_PROCESSES_FILE", "")

# Metrics: every server, worker and beat process writes its counters into one folder and a
# scrape of /metrics sums them (prometheus-client's multiprocess mode). It must be set before
# prometheus-client is first imported, which happens only after settings load.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(VAR_DIR / "metrics"))
Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
# Who may read /metrics: a bearer token when set, else these networks (loopback by default;
# behind a reverse proxy on this machine every client is loopback: set the token). A network
# that does not parse stops the start, rather than failing every scrape.
OANP_METRICS_TOKEN = os.environ.get("OANP_METRICS_TOKEN", "")
OANP_METRICS_ALLOW = [
    str(ipaddress.ip_network(n.strip(), strict=False))
    for n in os.environ.get("OANP_METRICS_ALLOW", "127.0.0.0/8,::1/128").split(",")
    if n.strip()
]

# One log format for the server, the worker and beat: text, or JSON lines.
LOGGING = logging_config(
    fmt=os.environ.get("OANP_LOG_FORMAT", "text").lower(),
    level=os.environ.get("OANP_LOG_LEVEL", "INFO").upper(),
)
# The worker logs through LOGGING too (oanp_site.celery), not through handlers of its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# How often the integrity check compares session heads and hash chains with the entries, and
# how often it also recomputes every entry's hash (otherwise only the entries new since the
# check before last).
OANP_INTEGRITY_CHECK_SECONDS = float(os.environ.get("OANP_INTEGRITY_CHECK_SECONDS", "300"))
OANP_INTEGRITY_FULL_SECONDS = float(os.environ.get("OANP_INTEGRITY_FULL_SECONDS", "86400"))

# The transparency log (docs/protocol.md §18): its origin, the first line of its checkpoints
# and its key's name; how often committed entries are integrated into its tree; the witnesses
# asked to cosign each checkpoint ("<verifier key> <URL>", one a line) and how many of their
# cosignatures a checkpoint needs before agreements cite it (default: all of them).
OANP_LOG_ORIGIN = os.environ.get(
    "OANP_LOG_ORIGIN", f"{urlsplit(OANP_PUBLIC_URL).netloc}/oanp-log"
).strip()
OANP_LOG_INTEGRATE_SECONDS = float(os.environ.get("OANP_LOG_INTEGRATE_SECONDS", "1"))
OANP_WITNESSES = [
    line.strip() for line in os.environ.get("OANP_WITNESSES", "").splitlines() if line.strip()
]
OANP_WITNESS_QUORUM = int(os.environ.get("OANP_WITNESS_QUORUM", str(len(OANP_WITNESSES))))

# How often the sweep makes the hosted answers whose task was lost (sessions_app.hosted_agents).
OANP_HOSTED_SWEEP_SECONDS = float(os.environ.get("OANP_HOSTED_SWEEP_SECONDS", "5"))
CELERY_BEAT_SCHEDULE = {
    # Beat's tick and, on each queue, a worker's answer, which /readyz reads
    # (arbiter_app.heartbeats).
    **{
        f"heartbeat-{queue}": {
            "task": "arbiter_app.tasks.heartbeat",
            "schedule": OANP_HEARTBEAT_SECONDS,
            # One that waited this long answers nothing new; drop it rather than pile them up.
            "options": {"queue": queue, "expires": OANP_WORKER_LOST_SECONDS},
        }
        for queue in OANP_QUEUES
    },
    "sweep-timers": {
        "task": "arbiter_app.tasks.sweep_timers",
        "schedule": OANP_TIMER_SWEEP_SECONDS,
    },
    # Deliveries whose task was lost (broker away, worker killed) are picked up here.
    "sweep-deliveries": {
        "task": "arbiter_app.tasks.sweep_deliveries",
        "schedule": OANP_TIMER_SWEEP_SECONDS,
    },
    # Hosted merchants' reveals after the end whose task was lost (sessions_app.hosted_agents).
    "sweep-hosted-reveals": {
        "task": "sessions_app.tasks.sweep_reveals",
        "schedule": OANP_TIMER_SWEEP_SECONDS,
    },
    # Hosted merchants' answers whose task was lost, made well inside the buyer's response
    # window (10 s at the least) so that the arbiter's lost task never times a merchant out.
    "sweep-hosted-answers": {
        "task": "sessions_app.tasks.sweep_answers",
        "schedule": OANP_HOSTED_SWEEP_SECONDS,
        # One that waited past the next is redundant: the next sweep finds the same turns.
        "options": {"expires": OANP_HOSTED_SWEEP_SECONDS},
    },
    # Committed entries into the transparency log's tree, a checkpoint signed for each batch.
    "integrate-log": {
        "task": "arbiter_app.tasks.integrate_log",
        "schedule": OANP_LOG_INTEGRATE_SECONDS,
        # One that waited past the next is redundant: the next takes every entry waiting.
        "options": {"expires": max(OANP_LOG_INTEGRATE_SECONDS, 1.0)},
    },
    # Hourly, the key policy: rotate every OANP_KEY_ROTATION_DAYS, retire after the overlap.
    "maintain-signing-keys": {
        "task": "arbiter_app.tasks.maintain_signing_keys",
        "schedule": float(os.environ.get("OANP_KEY_CHECK_SECONDS", "3600")),
    },
    # Session heads and hash chains checked against their entries (arbiter_app.integrity).
    "check-integrity": {
        "task": "arbiter_app.tasks.check_integrity",
        "schedule": OANP_INTEGRITY_CHECK_SECONDS,
        # A check that waited a whole interval is superseded by the next one.
        "options": {"expires": OANP_INTEGRITY_CHECK_SECONDS},
    },
}
