"""Helpers the tests and the bench share: waiting for a condition (:mod:`.waiting`), and the
processes they run, free ports and real Celery workers (:mod:`.processes`)."""
