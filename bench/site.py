"""Settings of the server the service section measures: the product's, plus the bare peer.

Only the URLconf differs, so the arbiter runs exactly as deployed, and the peer endpoint of
:mod:`bench.urls` is reachable in the bench's server and nowhere else.
"""

from oanp_site.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
