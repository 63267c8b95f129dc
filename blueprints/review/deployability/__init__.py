"""Deployability, proven offline: what a real `pulumi up` needs that Pulumi's mock engine never checks
(CRDs and webhooks installed first, pods schedulable and admitted, KEDA's Prometheus address).
"""
