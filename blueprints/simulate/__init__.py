"""Fleet simulation: replay a day of traffic (or a trace) against a planned fleet with its autoscaler's real
settings, and render it; replay a batch service's daily run (`batch.py`).

May import `blueprints.capacity` and below.
"""
