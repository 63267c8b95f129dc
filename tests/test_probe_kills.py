"""A probe kill skips the drain: every container that sleeps in preStop gives its liveness and startup probes their own
short grace period, so a hung engine restarts in seconds, while deletion keeps the pod's whole drain window."""

from __future__ import annotations

import copy
import dataclasses

from blueprints.core import defaults
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.deployability.context import containers_of, pod_spec
from blueprints.review.deployability.processes import _probe_kill_findings
from tests.conftest import ROOT

#: The kubelet's floor on the stop after preStop (pkg/kubelet/kuberuntime `minimumGracePeriodInSeconds`), s.
KUBELET_MIN_GRACE_S = 2


def draining_containers(report) -> list[tuple[object, dict, dict]]:
    """(record, pod spec, container) of every container with a preStop hook in a stack's manifests."""
    found = []
    for record in report.resources:
        spec = pod_spec(record)
        if spec is not None and not record.read:
            found += [(record, spec, c) for c in containers_of(spec, "containers")
                      if (c.get("lifecycle") or {}).get("preStop")]
    return found


def test_every_probe_kill_of_a_draining_container_is_bounded_in_every_bundled_stack(bundled_previews):
    images = set()
    for stack, report in bundled_previews.items():
        for record, spec, container in draining_containers(report):
            sleep = container["lifecycle"]["preStop"]["sleep"]["seconds"]
            assert spec["terminationGracePeriodSeconds"] > sleep  # deletion still drains the whole window
            for probe in ("livenessProbe", "startupProbe"):
                assert container[probe]["terminationGracePeriodSeconds"] == defaults.PROBE_KILL_GRACE_S, (
                    stack, container["name"], probe)
                # what a probe kill waits before SIGKILL, against the sleep it used to wait out
                assert defaults.PROBE_KILL_GRACE_S + KUBELET_MIN_GRACE_S < sleep
            assert "terminationGracePeriodSeconds" not in container["readinessProbe"]  # the API server refuses it
            images.add(container["image"].split(":")[0])
        assert report.manifest_problems == {}, stack  # the field validates against the cluster's schema
        assert [f for f in report.deployability if f.check == "probe-kill-drain"] == [], stack
    # every archetype's engine, the router and the proxy drain, and all of them were checked
    assert {"vllm/vllm-openai", "nvcr.io/nvidia/tritonserver", "envoyproxy/envoy",
            "ghcr.io/vllm-project/production-stack/router"} <= images


def test_a_probe_that_waits_out_the_drain_fails_the_preview(bundled_previews):
    report = bundled_previews["chat-assistant-prod"]
    [(record, _, engine)] = [x for x in draining_containers(report) if x[2]["name"] == "vllm"]
    sleep = engine["lifecycle"]["preStop"]["sleep"]["seconds"]
    broken = dataclasses.replace(record, inputs=copy.deepcopy(record.inputs))
    [vllm] = [c for c in pod_spec(broken)["containers"] if c["name"] == "vllm"]
    del vllm["livenessProbe"]["terminationGracePeriodSeconds"]  # the pod's grace period applies again
    [finding] = _probe_kill_findings(broken, pod_spec(broken))
    assert finding.check == "probe-kill-drain" and "livenessProbe" in finding.message
    assert f"waits {sleep} s before SIGTERM" in finding.message  # the whole drain sleep (below the pod's grace)
    stack = dataclasses.replace(report, resources=[broken if r is record else r for r in report.resources])
    assert [f.resource for f in check_deployability(stack, stacks_dir=ROOT / "stacks")
            if f.check == "probe-kill-drain"] == [record.urn]
