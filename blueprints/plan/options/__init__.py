"""The option searches: the cheapest instance type, parallelism and replica count meeting the SLO within
the guardrails (LLM and non-generative), and why none exists when none does.
"""
