"""Fleet simulation: replay a day of traffic (or a trace) against a planned fleet with its autoscaler's real
settings, and render it.

May import `blueprints.capacity` and below.
"""
