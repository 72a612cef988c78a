"""``make demo``: the demo's accounts, hosted merchants and buyers, and the run that serves them.

Nothing of the product imports this package; the management commands ``demo`` and
``seed_demo`` are its entry points.
"""
