"""One of the web's Daphne processes (:mod:`oanp_site.serve`), on the socket it inherited.

``python -m oanp_site.web_process FD``: loads the project's ASGI application first, then
listens on the socket ``FD`` and serves it with Daphne. A socket of its own (``SO_REUSEPORT``)
starts taking its share of the connections when it listens, so it listens only once the
process can answer them: a process started again after a crash would otherwise hold a share
of the clients for the seconds Django takes to load. A shared socket listens already; listening
again changes nothing.
"""

from __future__ import annotations

import socket
import sys

from daphne.cli import CommandLineInterface

from oanp_site.serve import BACKLOG

APPLICATION = "oanp_site.asgi:application"


def daphne_arguments(fd: int) -> list[str]:
    # Never --proxy-headers: see oanp_site.serve on OANP_PROXY_HEADERS.
    return ["--fd", str(fd), APPLICATION]


def main(argv: list[str]) -> None:
    fd = int(argv[0])
    # Django is set up and the application built here; Daphne then finds the module loaded.
    import oanp_site.asgi  # noqa: F401

    listener = socket.socket(fileno=fd)
    listener.listen(BACKLOG)
    listener.detach()  # the descriptor stays open, for Daphne
    CommandLineInterface().run(daphne_arguments(fd))


if __name__ == "__main__":
    main(sys.argv[1:])
