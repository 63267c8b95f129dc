"""Offline preview: run the real Pulumi program (`__main__.py`) under Pulumi's mock engine and record everything.

No cloud account, no Pulumi CLI: a custom mock monitor sees every registration (type, name, parent, provider,
inputs). Kubernetes resources become plain manifests (camelCase, as the engine sees them).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import runpy
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import yaml


from blueprints.catalog.cluster_network import eks_default_service_cidr
from blueprints.catalog.names import load_name_catalog

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.deploy_inputs import DeployInput, deploy_inputs
from blueprints.contracts.sections import CapacityType
from blueprints.core.errors import StackConfigError, read_text_file
from blueprints.review.manifests import manifest_id, validate_manifest
from blueprints.contracts.platform import PlatformConfig, PlatformKind, PlatformOutputs, planned_outputs
from blueprints.contracts.pulumi_config import ConfigEntry, engine_value, project_config_problems
from blueprints.core.project import PROJECT_FILE
from blueprints.core.yamlio import load_yaml
from blueprints.contracts.stackconfig import (
    PLATFORM_STACK_KEY, PROJECT, platform_stack_override_problem, read_platform_config, read_stack_settings,
    stack_config_path,
)

#: Account id used in mocked ARNs (AWS's documentation example account).
MOCK_ACCOUNT_ID = "123456789012"
#: The CIDR block the mocks give an existing VPC (`aws:ec2/getVpc`).
MOCK_EXISTING_VPC_CIDR = "10.20.0.0/16"
SECRET_PLACEHOLDER = "[secret]"
#: What a `secure:` API key decrypts to offline: long enough and without whitespace for the deploy-time check
#: (`components.access.checked_api_key`), which judges the real key when `pulumi up` decrypts it.
OFFLINE_API_KEY = "[secret:offline-stand-in-for-servingblueprints:apiKey]"
#: The config keys a real `pulumi up` needs set (`blueprints.contracts.deploy_inputs`) that the stack file lacks get a
#: placeholder offline (the report names each, with the command that sets it); a non-secret CA bundle gets this PEM,
#: so the preview shows the trust anchor the real bundle gets.
OFFLINE_CA_BUNDLE = ("-----BEGIN CERTIFICATE-----\n(offline preview: set servingblueprints:rolesAnywhereCaBundle to "
                     "your CA's PEM bundle)\n-----END CERTIFICATE-----\n")


@dataclass(frozen=True)
class RegisteredResource:
    """One resource the program registered: `type` token, logical `name`, parent's name, and its inputs."""

    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    parent_urn: str | None = None
    ignore_changes: tuple[str, ...] = ()
    dependencies: tuple[str, ...] = ()
    #: A read of an existing resource (`pulumi.StackReference`, `get`), not a registration.
    read: bool = False
    provider: str | None = None
    delete_before_replace: bool = False
    replace_with: tuple[str, ...] = ()
    #: The id the mock engine gave it (a security group's `sg-...`): what other resources' inputs name it by.
    resource_id: str | None = None


@dataclass(frozen=True)
class PolicyVerdict:
    """One policy finding: `level` is `mandatory` (fails the preview) or `advisory`."""

    policy: str
    level: str
    resource: str
    message: str


@dataclass(frozen=True)
class DeployabilityFinding:
    """Something a real `pulumi up` would trip on that the mock engine does not check (`blueprints.review.deployability.checks`):
    `check` names the rule, `resource` the object (or the stack), `message` the problem and the fix."""

    check: str
    resource: str
    message: str


@dataclass(frozen=True)
class SignalFinding:
    """A scaling signal, alert or dashboard query that would read nothing or compare the wrong unit
    (`blueprints.review.signals`): `check` names the rule, `resource` the object, `message` the problem and the fix."""

    check: str
    resource: str
    message: str


@dataclass
class PreviewReport:
    """What `pulumi up` would create for one stack (a service or a shared platform), computed offline, with its
    checks: manifests against the Kubernetes schemas, deployability, and the policy pack."""

    stack: str
    archetype: str
    resources: list[RegisteredResource]
    manifests: list[dict[str, Any]]
    outputs: dict[str, Any]
    subject: Blueprint | PlatformConfig = field(repr=False)
    manifest_problems: dict[str, list[str]] = field(default_factory=dict)
    policy_verdicts: list[PolicyVerdict] = field(default_factory=list)
    deployability: list[DeployabilityFinding] = field(default_factory=list)
    signals: list[SignalFinding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: The platform a service lands on (its planned outputs stood in for the StackReference).
    platform: PlatformConfig | None = field(default=None, repr=False)
    #: Config keys a real `pulumi up` needs that the stack file does not set (a placeholder stood in for each).
    deploy_inputs: list[DeployInput] = field(default_factory=list)

    @property
    def blueprint(self) -> Blueprint:
        """The service's blueprint; raises `TypeError` for a platform stack (use `subject`)."""
        if not isinstance(self.subject, Blueprint):
            raise TypeError(f"{self.stack} is a platform stack; it has no blueprint")
        return self.subject

    @property
    def is_platform(self) -> bool:
        return isinstance(self.subject, PlatformConfig)

    @property
    def region(self) -> str:
        return self.subject.region

    @property
    def environment(self) -> str:
        return self.subject.environment

    @property
    def kubernetes_version(self) -> str:
        return self.subject.kubernetes_version if self.is_platform else self.blueprint.platform.kubernetes_version

    @property
    def monthly_cost_usd(self) -> float:
        return self.subject.monthly_cost_usd if self.is_platform else self.blueprint.predictions.monthly_cost_usd

    @property
    def mandatory_violations(self) -> list[PolicyVerdict]:
        return [v for v in self.policy_verdicts if v.level == "mandatory"]

    @property
    def clean(self) -> bool:
        """No invalid manifest, no deployability or signal finding and no mandatory policy violation."""
        return (not self.manifest_problems and not self.mandatory_violations and not self.deployability
                and not self.signals)

    @property
    def compliance(self) -> dict[str, Any]:
        """What the stack records of its compliance: a service's requirements (`Blueprint.compliance`), a platform's
        settings (audit logs, private API endpoint, secrets key)."""
        if self.is_platform:
            cfg = self.subject
            return {"audit_logging": cfg.audit_logging, "private_endpoint": cfg.network.private_endpoint,
                    "secrets_kms": cfg.secrets_kms}
        return self.blueprint.compliance.model_dump(mode="json")

    def depends_on(self, record: RegisteredResource) -> list[str]:
        """The URNs a resource waits for: its explicit `depends_on`, the resources its inputs come from, and its
        provider (a read such as the platform's StackReference included)."""
        found = set(record.dependencies)
        if record.provider:
            found.add(record.provider.rsplit("::", 1)[0])
        return sorted(found)

    def to_json(self) -> dict[str, Any]:
        """`{"stack", "archetype", "region", "compliance", "resources": [{"urn", "type", "name", "parent", "read",
        "depends_on", "inputs"}], "manifests", "manifest_problems", "deployability", "signals", "policy_verdicts",
        "warnings", "deploy_inputs", "predictions", "outputs", "blueprint"}` (`deploy_inputs`: the config keys `pulumi up`
        needs that the stack file does not set). `archetype` is `platform` for a platform stack, whose
        `predictions` hold its cost lines and whose `blueprint` is None; a service's `blueprint` is its stack config's
        (the review of a later report against this one compares requirements and plan field by field)."""
        predictions = (self.subject.model_dump(mode="json", include={"cost_lines", "monthly_cost_usd"})
                       if self.is_platform else self.blueprint.predictions.model_dump(mode="json"))
        return {
            "stack": self.stack,
            "archetype": self.archetype,
            "region": self.region,
            "compliance": self.compliance,
            "resources": [{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "read": r.read,
                           "depends_on": self.depends_on(r), "inputs": r.inputs} for r in self.resources],
            "manifests": self.manifests,
            "manifest_problems": self.manifest_problems,
            "deployability": [asdict(f) for f in self.deployability],
            "signals": [asdict(f) for f in self.signals],
            "policy_verdicts": [asdict(v) for v in self.policy_verdicts],
            "warnings": self.warnings,
            "deploy_inputs": [{"key": i.key, "secret": i.secret, "why": i.why, "set_with": i.command(self.stack)}
                              for i in self.deploy_inputs],
            "predictions": predictions,
            "outputs": self.outputs,
            "blueprint": None if self.is_platform else self.blueprint.model_dump(mode="json"),
        }


def _normalise(value: Any) -> Any:
    """Mock inputs arrive with every number as a float: give integral floats back as ints; drop None; sort keys.
    Assets and archives (a Lambda function's code) become `{"file": name, "sha256": ...}` / `{"archive": {...}}`: the
    content's digest, not the checkout's path, so two checkouts of the same code report the same input."""
    import pulumi

    if isinstance(value, pulumi.asset.FileAsset):
        path = Path(value.path)
        return {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    if isinstance(value, pulumi.asset.StringAsset):
        return {"text_sha256": hashlib.sha256(value.text.encode()).hexdigest()}
    if isinstance(value, pulumi.asset.AssetArchive):
        return {"archive": {k: _normalise(v) for k, v in sorted(value.assets.items())}}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):  # sorted keys: the engine's map order is not stable, reports must be
        return {k: _normalise(value[k]) for k in sorted(value) if value[k] is not None}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _parent_name(urn: str) -> str | None:
    """The parent's logical name; None for the stack root."""
    if not urn or "::pulumi:pulumi:Stack::" in urn:
        return None
    return urn.rsplit("::", 1)[-1]


@dataclass
class MockRun:
    """Everything a program registered under the mock engine, and its resolved exports."""

    records: list[RegisteredResource]
    outputs: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def of_type(self, type_token: str) -> list[RegisteredResource]:
        """Registrations of one type token, e.g. `kubernetes:apps/v1:Deployment`, in URN order."""
        return [r for r in self.records if r.type == type_token]

    def one(self, type_token: str) -> RegisteredResource:
        """The single registration of `type_token`; AssertionError if there are none or several."""
        found = self.of_type(type_token)
        assert len(found) == 1, f"expected one {type_token}, found {[r.name for r in found]}"
        return found[0]


#: The organization the mock engine reports (`pulumi.get_organization()`): the DIY backend's fixed name.
MOCK_ORGANIZATION = "organization"


class UnknownStackReference(Exception):
    """A `pulumi.StackReference` under the mock engine names a stack the offline preview has no outputs for."""


@dataclass(frozen=True)
class StackOutputs:
    """Outputs a mocked `pulumi.StackReference` returns: values and the names of the secret ones."""

    outputs: dict[str, Any]
    secret_names: tuple[str, ...] = ()


def run_under_mocks(body: Callable[[], Any], *, stack: str, config: dict[str, str] | None = None,
                    secret_keys: list[str] | None = None,
                    stack_references: dict[str, StackOutputs] | None = None) -> MockRun:
    """Run `body` as a Pulumi program under the mock engine (`preview=False`, so every apply runs).

    Args:
        body: builds resources; a dict it returns is resolved as outputs (like `pulumi.export`; anything else it
            returns is ignored). Stack exports made with `pulumi.export` are resolved too.
        stack: stack name the program sees (`pulumi.get_stack()`).
        config: engine config, `{"ns:key": "string or JSON"}`.
        secret_keys: config keys to treat as secrets.
        stack_references: stack name (the last part of `org/project/stack`) -> the outputs a `pulumi.StackReference`
            to it reads. A reference to any other stack fails like a missing stack.

    Returns:
        A `MockRun`: every registration (type, name, parent, inputs as the engine sees them: camelCase, integral
        numbers as ints, secrets masked) sorted by URN, and the resolved outputs.
    """
    import pulumi
    from pulumi.runtime import mocks as pmocks
    from pulumi.runtime import rpc
    from pulumi.runtime.settings import SETTINGS
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

    config = dict(config or {})
    region = config.get("aws:region", "us-east-1")

    references = dict(stack_references or {})

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            if args.typ == "pulumi:pulumi:StackReference":
                name = args.resource_id or args.inputs.get("name") or args.name
                found = references.get(str(name).rsplit("/", 1)[-1])
                if found is None:
                    raise UnknownStackReference(f"stack reference {name!r}: no such stack (the offline preview knows "
                                                f"{', '.join(sorted(references)) or 'none'})")
                return name, {"name": name, "outputs": found.outputs,
                              "secretOutputNames": list(found.secret_names)}
            return mock_outputs(args.typ, args.name, args.inputs, region=region)

        def call(self, args: pulumi.runtime.MockCallArgs):
            return mock_call(args.token, args.args, region=region)

    records: list[RegisteredResource] = []

    class Monitor(pmocks.MockMonitor):
        def RegisterResource(self, request):
            response = super().RegisterResource(request)
            if request.type != "pulumi:pulumi:Stack":
                _ensure_event_loop()
                inputs = rpc.deserialize_properties(request.object)
                records.append(RegisteredResource(urn=response.urn, type=request.type, name=request.name,
                                                  parent=_parent_name(request.parent), custom=request.custom,
                                                  inputs=_normalise(_unwrap_secrets(inputs)),
                                                  parent_urn=request.parent if _parent_name(request.parent) else None,
                                                  dependencies=tuple(sorted(request.dependencies)),
                                                  ignore_changes=tuple(request.ignoreChanges),
                                                  provider=request.provider or None,
                                                  delete_before_replace=request.deleteBeforeReplace,
                                                  replace_with=tuple(request.replace_with),
                                                  resource_id=response.id or None))
            return response

        def ReadResource(self, request):
            response = super().ReadResource(request)
            _ensure_event_loop()
            inputs = rpc.deserialize_properties(request.properties)
            records.append(RegisteredResource(urn=response.urn, type=request.type, name=request.name,
                                              parent=_parent_name(request.parent), custom=True,
                                              inputs=_normalise(_unwrap_secrets(inputs)),
                                              parent_urn=request.parent if _parent_name(request.parent) else None,
                                              dependencies=tuple(sorted(request.dependencies)), read=True,
                                              provider=request.provider or None))
            return response

    warnings: list[str] = []

    class Collect(logging.Handler):  # `pulumi.log.warn` from the program goes into the report, not stderr
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logger = logging.getLogger(f"servingblueprints.preview.{stack}")
    logger.handlers[:] = [Collect()]
    logger.propagate = False
    SETTINGS.rpc_manager.clear()
    SETTINGS.outputs.clear()
    # A fresh root Stack per run: `set_mocks` keeps an existing root, whose exports would leak into this run.
    from pulumi.runtime.settings import ROOT
    ROOT.set(None)
    pulumi.runtime.set_all_config(config, secret_keys or [])
    mocks = Mocks()
    outputs: dict[str, Any] = {}

    def program_body():
        returned = body()
        returned = returned if isinstance(returned, dict) else {}
        root = pulumi.runtime.get_root_resource()
        exported = {**dict(getattr(root, "outputs", {}) or {}), **returned}

        async def resolve():
            for key, value in exported.items():
                output = pulumi.Output.from_input(value)
                secret = await output.is_secret()  # a secret stack output stays masked in every report
                outputs[key] = SECRET_PLACEHOLDER if secret else _normalise(_unwrap_secrets(await output.future()))

        return resolve()

    with _without_source_positions():  # from the root stack resource, which set_mocks registers, on
        pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=Monitor(mocks),
                                 logger=logger, organization=MOCK_ORGANIZATION)
        _sync_await(run_pulumi_func(program_body))
    records.sort(key=lambda r: r.urn)
    return MockRun(records=records, outputs=outputs, warnings=sorted(set(warnings)))


@contextlib.contextmanager
def _without_source_positions() -> Iterator[None]:
    """Within it, the Pulumi SDK gives each resource it registers an empty stack trace.

    pulumi 3.272.0 builds each registration's stack trace (`pulumi.runtime.resource._get_stack_trace`: every frame of
    the Python stack, its source line read) so the engine can show where the resource was declared; the mock monitor
    never reads it (`pulumi.runtime.mocks.MockMonitor.RegisterResource`), and neither does ours. It took a quarter of
    a preview's CPU in the test suite, whose stacks are deep. Should the SDK rename it, previews stay right, only
    slower."""
    from pulumi.runtime import resource
    from pulumi.runtime.proto import source_pb2

    traced = getattr(resource, "_get_stack_trace", None)
    if traced is None:
        yield
        return
    resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        resource._get_stack_trace = traced


def _unwrap_secrets(value: Any) -> Any:
    """Replace secret values with a placeholder so reports never print them."""
    from pulumi.runtime.rpc import _special_sig_key, _special_secret_sig  # type: ignore[attr-defined]

    if isinstance(value, dict):
        if value.get(_special_sig_key) == _special_secret_sig:
            inner = value.get("value")
            if isinstance(inner, dict):  # keep the shape (e.g. a Secret's stringData keys) so manifests still validate
                return {k: SECRET_PLACEHOLDER for k in inner}
            return SECRET_PLACEHOLDER
        return {k: _unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v) for v in value]
    return value


def mock_secret_value(name: str, length: int) -> str:
    """The value the mocks give a pulumi-random password named `name` (deterministic, so tests can look for it)."""
    return (hashlib.sha256(f"preview-secret:{name}".encode()).hexdigest() * 4)[:length]


def mock_outputs(typ: str, name: str, inputs: dict, *, region: str) -> tuple[str, dict]:
    """Realistic provider outputs for a mocked resource: ids, ARNs and names as AWS/Kubernetes would return them."""
    suffix = hashlib.sha256(name.encode()).hexdigest()[:7]
    state = dict(inputs)
    if typ.startswith("kubernetes:"):
        meta = dict(state.get("metadata") or {})
        meta.setdefault("name", f"{name}-{suffix}")
        state["metadata"] = meta
        if typ == "kubernetes:core/v1:Service" and (state.get("spec") or {}).get("type") == "LoadBalancer":
            if any(k.startswith("service.beta.kubernetes.io/aws-load-balancer-") for k in meta.get("annotations") or {}):
                # The load balancer controller's NLB: `k8s-<namespace>-<name>-<hash>.elb.<region>.amazonaws.com`.
                host = (f"k8s-{meta.get('namespace', 'default')[:8]}-{meta['name'][:8]}-{suffix}.elb.{region}"
                        ".amazonaws.com")
                state["status"] = {"loadBalancer": {"ingress": [{"hostname": host}]}}
            else:  # MetalLB assigns an address from its pool
                state["status"] = {"loadBalancer": {"ingress": [{"ip": f"192.168.50.{int(suffix, 16) % 200 + 20}"}]}}
        if typ == "kubernetes:core/v1:Service" and (state.get("spec") or {}).get("type") == "NodePort":
            ports = [dict(p) for p in (state.get("spec") or {}).get("ports") or []]
            for i, port in enumerate(ports):  # the API server assigns a free port of 30000-32767
                port.setdefault("nodePort", 30000 + (int(suffix, 16) + i) % 2768)
            state["spec"] = {**state["spec"], "ports": ports}
        if typ == "kubernetes:networking.k8s.io/v1:Ingress":
            state["status"] = {"loadBalancer": {"ingress": [{"ip": f"192.168.50.{int(suffix, 16) % 200 + 20}"}]}}
        return f"{meta.get('namespace', 'default')}/{meta['name']}", state
    if typ == "random:index/randomPassword:RandomPassword":
        # pulumi-random computes `result` at create time; offline it is a deterministic stand-in of the asked length
        # (never printed: the program wraps it as a secret).
        state["result"] = mock_secret_value(name, int(inputs.get("length") or 16))
        return f"{name}-{suffix}", state
    service = typ.split(":")[1].split("/")[0] if typ.startswith("aws:") else ""
    names = load_name_catalog()
    rule = names.aws_rule(typ) if service else None
    if rule is not None and rule.autonamed and not inputs.get(rule.field):
        state[rule.field] = names.autoname_of(name, rule, suffix=suffix)  # Pulumi's auto-name, as the provider sets it
    if typ == "aws:s3/bucket:Bucket":
        bucket = inputs.get("bucket") or f"{name}-{suffix}"
        state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}", region=region,
                     bucketRegionalDomainName=f"{bucket}.s3.{region}.amazonaws.com")
        return bucket, state
    if typ == "aws:iam/role:Role":
        state.update(name=inputs.get("name") or f"{name}-{suffix}", arn=f"arn:aws:iam::{MOCK_ACCOUNT_ID}:role/{name}")
        return state["name"], state
    if typ == "aws:iam/policy:Policy":
        # IAM is global: no region in the ARN (docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html).
        policy = inputs.get("name") or f"{name}-{suffix}"
        arn = f"arn:aws:iam::{MOCK_ACCOUNT_ID}:policy{inputs.get('path') or '/'}{policy}"
        state.update(name=policy, arn=arn, policyId=f"ANPA{suffix.upper()}PREVIEW")
        return arn, state
    if typ == "aws:eks/cluster:Cluster":
        cluster = inputs.get("name") or f"{name}-{suffix}"
        state.update(name=cluster, arn=f"arn:aws:eks:{region}:{MOCK_ACCOUNT_ID}:cluster/{cluster}",
                     endpoint=f"https://{suffix.upper()}0000000000000000000000000.gr7.{region}.eks.amazonaws.com",
                     certificateAuthority={"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCm1vY2sKLS0tLS1FTkQ="},
                     vpcConfig={**(inputs.get("vpcConfig") or {}), "clusterSecurityGroupId": f"sg-{suffix}c"},
                     # EKS reports the Service CIDR it was given, else its own choice for the VPC (here the
                     # existing VPC `aws:ec2/getVpc` stands in).
                     kubernetesNetworkConfig={"ipFamily": "ipv4", "serviceIpv4Cidr": (
                         inputs.get("kubernetesNetworkConfig") or {}).get("serviceIpv4Cidr")
                         or eks_default_service_cidr([MOCK_EXISTING_VPC_CIDR])},
                     status="ACTIVE", platformVersion="eks.1")
        return cluster, state
    if typ in ("aws:sagemaker/model:Model", "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
               "aws:sagemaker/endpoint:Endpoint"):
        resource = typ.rsplit(":", 1)[-1]
        kind = {"Model": "model", "EndpointConfiguration": "endpoint-config", "Endpoint": "endpoint"}[resource]
        sm_name = inputs.get("name") or f"{name}-{suffix}"
        state.update(name=sm_name, arn=f"arn:aws:sagemaker:{region}:{MOCK_ACCOUNT_ID}:{kind}/{sm_name}")
        return sm_name, state
    if typ == "aws:ec2/vpc:Vpc":
        state.update(arn=f"arn:aws:ec2:{region}:{MOCK_ACCOUNT_ID}:vpc/vpc-{suffix}", ownerId=MOCK_ACCOUNT_ID)
        return f"vpc-{suffix}", state
    if typ == "aws:ec2/subnet:Subnet":
        state.update(arn=f"arn:aws:ec2:{region}:{MOCK_ACCOUNT_ID}:subnet/subnet-{suffix}")
        return f"subnet-{suffix}", state
    if typ == "aws:ec2/securityGroup:SecurityGroup":
        state.update(arn=f"arn:aws:ec2:{region}:{MOCK_ACCOUNT_ID}:security-group/sg-{suffix}")
        return f"sg-{suffix}", state
    if typ in ("aws:rolesanywhere/trustAnchor:TrustAnchor", "aws:rolesanywhere/profile:Profile"):
        resource_id = f"{hashlib.sha256(name.encode()).hexdigest()[:8]}-0000-4000-8000-{suffix}00000"
        kind = "trust-anchor" if typ.endswith("TrustAnchor") else "profile"
        state.update(arn=f"arn:aws:rolesanywhere:{region}:{MOCK_ACCOUNT_ID}:{kind}/{resource_id}")
        return resource_id, state
    if typ == "aws:kms/key:Key":
        key_id = f"{suffix}-0000-4000-8000-000000000000"
        state.update(keyId=key_id, arn=f"arn:aws:kms:{region}:{MOCK_ACCOUNT_ID}:key/{key_id}")
        return key_id, state
    if service:
        state.setdefault("arn", f"arn:aws:{service}:{region}:{MOCK_ACCOUNT_ID}:{name}")
    return f"{name}-{suffix}", state


def mock_call(token: str, args: dict, *, region: str) -> dict:
    """Realistic results for provider functions (invokes). Keys are camelCase, as the engine returns them."""
    if token == "aws:ec2/getVpc:getVpc":
        vpc_id = args.get("id") or "vpc-0preview"
        return {"id": vpc_id, "cidrBlock": MOCK_EXISTING_VPC_CIDR, "ownerId": MOCK_ACCOUNT_ID, "state": "available",
                "arn": f"arn:aws:ec2:{region}:{MOCK_ACCOUNT_ID}:vpc/{vpc_id}", "default": False}
    if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
        # Four zones whose names map to IDs out of order, as an older region's per-account mapping does (an account's
        # `a` is az3): the program must choose by ID.
        prefix = f"{region[:2]}{region.split('-')[1][0]}{region.rsplit('-', 1)[-1]}"
        return {"names": [f"{region}{letter}" for letter in "abcd"],
                "zoneIds": [f"{prefix}-az{i}" for i in (3, 1, 4, 2)], "id": region}
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {"accountId": MOCK_ACCOUNT_ID, "arn": f"arn:aws:iam::{MOCK_ACCOUNT_ID}:user/preview",
                "userId": "AIDAPREVIEW", "id": MOCK_ACCOUNT_ID}
    if token == "aws:index/getRegion:getRegion":
        return {"name": region, "region": region, "id": region}
    if token == "aws:index/getPartition:getPartition":
        return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
    return {}


def engine_config(entries: Mapping[str, ConfigEntry], subject: Blueprint | PlatformConfig
                  ) -> tuple[dict[str, str], list[str], list[DeployInput]]:
    """The stack's config as the engine passes it to the program (`engine_value`), from the keys the Pulumi CLI reads
    (`read_stack_settings`): secrets masked; a placeholder for every deploy input (`deploy_inputs`) the file does not
    set: (config, secret keys, those inputs)."""
    config, secret_keys = {}, []
    for key, entry in entries.items():
        if entry.secret:
            config[key] = OFFLINE_API_KEY if key == f"{PROJECT}:apiKey" else SECRET_PLACEHOLDER
            secret_keys.append(key)
        else:
            config[key] = engine_value(entry)
    missing = [i for i in deploy_inputs(subject) if i.key not in config]
    for item in missing:
        config[item.key] = SECRET_PLACEHOLDER if item.secret else OFFLINE_CA_BUNDLE
        if item.secret:
            secret_keys.append(item.key)
    return config, secret_keys, missing


def platform_stand_in(bp: Blueprint, stacks_dir: Path) -> tuple[PlatformConfig, StackOutputs] | None:
    """The platform a service lands on, from its planned stack config, and the outputs its StackReference returns
    offline (`blueprints.contracts.platform.planned_outputs`); None when the service lands on no platform.

    Raises:
        StackConfigError: the platform's stack config is missing or invalid, or the service does not land on it as
            planned (`landing_problems`); the message names both stack configs and the fix.
    """
    if bp.platform.stack is None:
        return None
    path = stack_config_path(stacks_dir, bp.platform.stack)
    if not path.exists():
        raise StackConfigError(f"{path}: {bp.stack} lands on platform {bp.platform.stack}, whose stack config is "
                               f"missing; plan it first (`blueprint plan` of any service on it writes it)")
    platform = read_platform_config(path)
    problems = landing_problems(bp, platform)
    if problems:
        raise StackConfigError(f"{stack_config_path(stacks_dir, bp.stack)} and {path}: {bp.stack} does not land on "
                               f"{platform.stack} as planned: {'; '.join(problems)}; re-plan the service "
                               "(`blueprint plan` of its requirements file rewrites both)")
    outputs = planned_outputs(platform).model_dump(mode="json")
    return platform, StackOutputs(outputs=outputs, secret_names=PlatformOutputs.SECRET_FIELDS)


def landing_problems(bp: Blueprint, platform: PlatformConfig) -> list[str]:
    """What keeps a service's blueprint from landing on `platform` as planned (empty: consistent): the same region,
    a cluster for a service on EKS, one Kubernetes version, spot only where the platform allows it, the platform's
    zones, and the service among the platform's services (a pilot: its environment's stack)."""
    problems = []
    if platform.region != bp.region:
        problems.append(f"the platform is in {platform.region} but the service in {bp.region}")
    if bp.platform.kind == "eks" and platform.kind is not PlatformKind.EKS:
        problems.append(f"the service runs on EKS but the platform is {platform.kind.value}-only (no cluster)")
    if bp.platform.kind == "eks" and bp.platform.kubernetes_version != platform.kubernetes_version:
        problems.append(f"the service records Kubernetes {bp.platform.kubernetes_version} but the platform runs "
                        f"{platform.kubernetes_version}")
    if bp.compute.capacity_type is CapacityType.SPOT and not platform.spot_allowed:
        problems.append("the service runs on spot capacity but the platform's spot_allowed is false")
    if bp.platform.zones is not None and bp.platform.zones != platform.network.az_count:
        problems.append(f"the service spreads over {bp.platform.zones} zones but the platform spans "
                        f"{platform.network.az_count}")
    # A pilot (`blueprint pilot`) lands where its environment's stack does: the platform lists that stack.
    listed = f"{bp.service}-{bp.environment}" if bp.pilot is not None else bp.stack
    if listed not in platform.services:
        problems.append(f"the platform's services ({', '.join(platform.services) or 'none'}) do not list {bp.stack}")
    return problems


def run_preview(stack: str, *, stacks_dir: Path = Path("stacks"), program: Path = Path("__main__.py")) -> PreviewReport:
    """Run the Pulumi program for `stack` offline and report what it would create.

    A service stack on a shared platform reads that platform's planned outputs through its StackReference (the
    platform's stack config must exist); a platform stack builds the platform.

    Args:
        stack: stack name, e.g. `chat-assistant-prod` or `platform-prod-us-east-1` (reads
            `<stacks_dir>/Pulumi.<stack>.yaml`).
        stacks_dir: folder of stack configs. Defaults to `stacks`.
        program: the Pulumi program file. Defaults to `__main__.py`.

    Returns:
        A `PreviewReport` with resources sorted by URN and Kubernetes manifests in the same order.

    Raises:
        StackConfigError: the stack config (or its platform's) is missing or invalid, or the program is missing.
    """
    path = stack_config_path(stacks_dir, stack)
    if not path.exists():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
        raise StackConfigError(f"{path}: no such stack config; known stacks: {', '.join(known) or 'none'} "
                               "(run `blueprint plan` first)")
    subject, entries = read_stack_settings(path)
    stand_in = platform_stand_in(subject, stacks_dir) if isinstance(subject, Blueprint) else None
    override = entries[PLATFORM_STACK_KEY].value if PLATFORM_STACK_KEY in entries else None
    if override is not None:
        problem = (f"expected a string, got {type(override).__name__}" if not isinstance(override, str) else
                   platform_stack_override_problem(override, subject) if isinstance(subject, Blueprint) else
                   "a platform stack reads no platform; remove it")
        if problem:
            raise StackConfigError(f"{path}: {PLATFORM_STACK_KEY}: {problem}")
    if not program.exists():
        raise StackConfigError(f"{program}: Pulumi program not found; run from the project folder (with Pulumi.yaml)")
    project_file = program.parent / PROJECT_FILE
    if project_file.is_file():
        try:
            project = load_yaml(read_text_file(project_file, StackConfigError, "project file"))
        except yaml.YAMLError as exc:
            raise StackConfigError(f"{project_file}: not valid YAML: {exc}") from None
        problems = project_config_problems(project, source=str(project_file))
        if problems:
            raise StackConfigError("; ".join(problems))
    config, secret_keys, missing = engine_config(entries, subject)
    program_file = program.resolve()

    def program_body() -> None:  # the module's globals are not outputs; `pulumi.export` calls are
        runpy.run_path(str(program_file), run_name="__main__")

    import pulumi

    references = {stand_in[0].stack: stand_in[1]} if stand_in else {}
    try:
        run = run_under_mocks(program_body, stack=stack, config=config, secret_keys=secret_keys,
                              stack_references=references)
    except pulumi.ConfigMissingError as exc:
        raise StackConfigError(f"{path}: the program needs config {exc.key!r}; set it with "
                               f"`pulumi config set{' --secret' if exc.secret else ''} {exc.key} <value> "
                               f"--stack {stack}`") from None
    except UnknownStackReference as exc:
        raise StackConfigError(f"{path}: {exc}; the service reads the platform it was planned for "
                               f"({PLATFORM_STACK_KEY} overrides where it is)") from None
    manifests = [manifest(r) for r in run.records if is_manifest(r)]
    version = subject.kubernetes_version if isinstance(subject, PlatformConfig) else \
        subject.platform.kubernetes_version
    problems = {}
    for obj in manifests:
        found = validate_manifest(obj, kubernetes_version=version)
        if found:
            problems[manifest_id(obj)] = found
    archetype = "platform" if isinstance(subject, PlatformConfig) else subject.archetype.value
    unset = [f"set before `pulumi up`: {item.key} ({item.why}): `{item.command(stack)}`" for item in missing]
    return PreviewReport(stack=stack, archetype=archetype, resources=run.records, manifests=manifests,
                         outputs=run.outputs, subject=subject, manifest_problems=problems,
                         warnings=[*unset, *run.warnings], platform=stand_in[0] if stand_in else None,
                         deploy_inputs=missing)


def is_manifest(record: RegisteredResource) -> bool:
    """A Kubernetes object (not a Helm release, which is a bundle of objects rendered in the cluster)."""
    return record.custom and record.type.startswith("kubernetes:") and not record.type.startswith("kubernetes:helm.sh/")


def manifest(record: RegisteredResource) -> dict[str, Any]:
    """A Kubernetes resource's inputs as a plain manifest (apiVersion, kind, metadata first)."""
    inputs = dict(record.inputs)
    head = {k: inputs.pop(k) for k in ("apiVersion", "kind", "metadata") if k in inputs}
    head.setdefault("metadata", {}).setdefault("name", record.name)
    return {**head, **inputs}
