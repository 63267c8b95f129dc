"""Compound services: one requirements file split into a generator and a retrieval part, each planned as a
service, and the end-to-end latency composed from the parts.
"""
