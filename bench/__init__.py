"""Numbers the project must know about itself: ``python -m bench`` (or ``make bench``).

Each section measures one part of the arbiter beside a peer or an aim taken in the same run,
and merges its figures into ``bench/results.json``; ``docs/BENCHMARKS.md`` is rendered from
that file. Sections are listed once, in ``SECTIONS`` of ``bench/__main__.py``.
"""
