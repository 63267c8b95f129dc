"""Builders for the policy tests: CrossGuard argument types built directly, as the analyzer would pass them.

Props go through pulumi-policy's `unknown_checking_proxy`, exactly as `Analyze`/`AnalyzeStack` wrap them. No test
imports `policies/__main__.py` (constructing `PolicyPack` starts a gRPC server and blocks).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies.rules import POLICIES

POLICY = {p.name: p for p in POLICIES}
#: What an unknown string looks like during `pulumi preview`.
UNKNOWN_STRING = UNKNOWN_STRING_VALUE


def urn(resource_type: str, name: str) -> str:
    return f"urn:pulumi:chat-assistant-prod::servingblueprints::{resource_type}::{name}"


def options(parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent)


def aws_provider(region: str = "us-east-1", **props: Any) -> PolicyProviderResource:
    """The default AWS provider as CrossGuard passes it: its props come from `aws:*` stack config."""
    return PolicyProviderResource("pulumi:providers:aws", unknown_checking_proxy({"region": region, **props}),
                                  urn("pulumi:providers:aws", "default_7_51_0"), "default_7_51_0")


def resource_violations(policy: str, resource_type: str, props: Mapping[str, Any], *, name: str = "r",
                        config: Mapping[str, Any] | None = None, provider: PolicyProviderResource | None = None,
                        parent: str | None = None) -> list[str]:
    """Messages `policy` reports for one resource (CrossGuard `Analyze`)."""
    messages: list[str] = []
    args = ResourceValidationArgs(resource_type, unknown_checking_proxy(copy.deepcopy(dict(props))),
                                  urn(resource_type, name), name, options(parent), provider, config)
    POLICY[policy].validate(args, lambda message, _urn=None: messages.append(message))
    return messages


def policy_resource(resource_type: str, props: Mapping[str, Any], *, name: str,
                    parent: PolicyResource | None = None,
                    provider: PolicyProviderResource | None = None) -> PolicyResource:
    return PolicyResource(resource_type, unknown_checking_proxy(copy.deepcopy(dict(props))), urn(resource_type, name),
                          name, options(parent.urn if parent else None), provider, parent, [], {})


def stack_violations(policy: str, resources: list[PolicyResource],
                     config: Mapping[str, Any] | None = None) -> list[tuple[str | None, str]]:
    """(URN or None for the stack, message) pairs `policy` reports (CrossGuard `AnalyzeStack`)."""
    found: list[tuple[str | None, str]] = []
    POLICY[policy].validate(StackValidationArgs(resources, config),
                            lambda message, resource_urn=None: found.append((resource_urn, message)))
    return found


def gpu_deployment(**pod_spec_changes: Any) -> dict[str, Any]:
    """A compliant vLLM Deployment on one L40S GPU (camelCase, as the engine sees it); pod spec keys replaced."""
    container = {
        "name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
        "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "25Gi"},
                      "requests": {"nvidia.com/gpu": "1", "memory": "25Gi"}},
        "startupProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "failureThreshold": 27},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        "securityContext": {"allowPrivilegeEscalation": False, "privileged": False, "runAsNonRoot": True,
                            "runAsUser": 10001, "capabilities": {"drop": ["ALL"]}},
    }
    spec = {
        "nodeSelector": {"node.kubernetes.io/instance-type": "g6e.xlarge"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
        **pod_spec_changes,
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "chat-assistant-vllm", "namespace": "serving"},
            "spec": {"replicas": 2, "template": {
                "metadata": {"annotations": {"servingblueprints.io/pod-start-s": "135",
                                             "servingblueprints.io/tensor-parallel-size": "1"}},
                "spec": spec}}}


def main_container(deployment: dict[str, Any]) -> dict[str, Any]:
    """The first container of a `gpu_deployment` (to change one field)."""
    return deployment["spec"]["template"]["spec"]["containers"][0]


def pod_annotations(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["metadata"]["annotations"]
