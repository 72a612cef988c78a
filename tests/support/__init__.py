"""Helpers the tests and the bench share: waiting for a condition (:mod:`.waiting`), the
processes they run, free ports and real Celery workers (:mod:`.processes`), and the factories
their cases are built from (:mod:`.factories`)."""
