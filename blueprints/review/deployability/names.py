"""The `physical-names` check of `blueprint preview` (`blueprints.review.deployability.checks`): every name a stack
gives AWS, Kubernetes or Helm is one they accept (`blueprints/catalog/names.yaml`).

An AWS resource's physical name is its name input when set, else Pulumi's auto-name `<logical name>-<7 random hex>`,
which is never truncated: a logical name too long for its type fails the real preview before any API call, and one
that only the provider's validation refuses fails just as early. Kubernetes objects are checked by kind (`metadata.name`
of a Service is a DNS-1035 label, a Job's at most 63 characters), every label value and container name of theirs,
and Helm release names (at most 53).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blueprints.catalog.names import NameCatalog, NameRule, load_name_catalog
from blueprints.review.preview import DeployabilityFinding, RegisteredResource
from blueprints.review.deployability.context import CheckContext, RELEASE, containers_of, get_in, pod_spec

#: pulumi-kubernetes names an object without `metadata.name` `<logical>-<8 random characters>` [assumption: the
#: provider's auto-name suffix length, not read here]; every object the program creates is named explicitly.
KUBERNETES_RANDOM_CHARS = 8


def _source(rule: NameRule) -> str:
    return rule.source.split(";")[0]


def aws_name(record: RegisteredResource, names: NameCatalog) -> tuple[str, bool] | None:
    """(the physical name of an AWS resource, whether Pulumi auto-names it); None for a type without a name rule or
    a name the provider requires (left to the provider's own error)."""
    rule = names.aws_rule(record.type)
    if rule is None:
        return None
    explicit = record.inputs.get(rule.field)
    if isinstance(explicit, str):
        return explicit, False
    return (names.autoname_of(record.name, rule), True) if rule.autonamed else None


def _aws_finding(record: RegisteredResource, names: NameCatalog) -> DeployabilityFinding | None:
    found = aws_name(record, names)
    if found is None:
        return None
    value, auto = found
    rule = names.aws_rule(record.type)
    assert rule is not None
    problem = rule.problem(value)
    if problem is None:
        return None
    kind = record.type.rsplit(":", 1)[-1]
    if auto:
        how = (f"auto-named {record.name!r} + '-' + {names.autoname.random_chars} random characters, never "
               "truncated")
        fix = (f"keep its logical name within {names.longest_logical(rule)} characters "
               f"(components.naming.fit) or set {rule.field} explicitly")
    else:
        how = f"its {rule.field}"
        fix = f"shorten {rule.field} to at most {rule.max} characters of {rule.pattern}"
    return DeployabilityFinding("physical-names", record.urn, (
        f"{kind} {record.name!r}: physical name {value!r} ({how}) has {problem} ({_source(rule)}): `pulumi up` "
        f"fails before any API call; {fix}"))


def _labels(inputs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(where, value) of every label an object and its pod template carry."""
    found = [(f"metadata.labels.{k}", v) for k, v in (get_in(inputs, "metadata", "labels") or {}).items()]
    found += [(f"spec.template.metadata.labels.{k}", v)
              for k, v in (get_in(inputs, "spec", "template", "metadata", "labels") or {}).items()]
    return found


def _kubernetes_findings(record: RegisteredResource, names: NameCatalog) -> list[DeployabilityFinding]:
    k8s = names.kubernetes
    kind = record.type.rsplit(":", 1)[-1]
    problems: list[str] = []
    name = get_in(record.inputs, "metadata", "name")
    if not isinstance(name, str):
        name = f"{record.name}-{'0' * KUBERNETES_RANDOM_CHARS}"  # auto-named
    rule = k8s.rule(kind)
    problem = rule.problem(name)
    if problem:
        problems.append(f"metadata.name {name!r} has {problem} ({_source(rule)})")
    for where, value in _labels(record.inputs):
        problem = k8s.label_value.problem(str(value))
        if problem:
            problems.append(f"{where} {str(value)!r} has {problem} ({_source(k8s.label_value)})")
    spec = pod_spec(record)
    for container in containers_of(spec) if spec is not None else []:
        problem = k8s.container.problem(str(container.get("name", "")))
        if problem:
            problems.append(f"container {container.get('name')!r} has {problem} ({_source(k8s.container)})")
    return [DeployabilityFinding("physical-names", record.urn, f"{kind} {record.name!r}: {p}: the API server refuses "
                                 "it; shorten it") for p in problems]


def check_names(ctx: CheckContext) -> list[DeployabilityFinding]:
    names = load_name_catalog()
    findings = []
    for record in ctx.report.resources:
        if record.read or not record.custom:
            continue
        if record.type.startswith("aws:"):
            finding = _aws_finding(record, names)
            findings += [finding] if finding else []
        elif record.type == RELEASE:
            release = str(record.inputs.get("name") or "")
            problem = names.kubernetes.helm_release.problem(release)
            if problem:
                findings.append(DeployabilityFinding("physical-names", record.urn, (
                    f"Helm release {release!r} has {problem} ({_source(names.kubernetes.helm_release)}): helm refuses "
                    "it; shorten it")))
        elif record.type.startswith("kubernetes:"):
            findings += _kubernetes_findings(record, names)
    return findings
