"""Offline preview: run the real Pulumi program (`__main__.py`) under Pulumi's mock engine and record everything.

No cloud account, no Pulumi CLI: a custom mock monitor sees every registration (type, name, parent, provider,
inputs). Kubernetes resources become plain manifests (camelCase, as the engine sees them).
"""

from __future__ import annotations

import hashlib
import logging
import json
import runpy
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable


from blueprints.yamlio import load_yaml

from blueprints.blueprint import Blueprint
from blueprints.errors import StackConfigError
from blueprints.manifests import manifest_id, validate_manifest
from blueprints.stackconfig import PROJECT, read_stack_config, stack_config_path

#: Account id used in mocked ARNs (AWS's documentation example account).
MOCK_ACCOUNT_ID = "123456789012"
SECRET_PLACEHOLDER = "[secret]"
#: Secrets the program requires only to reach a real cluster; the offline preview stands in a placeholder when the
#: stack file does not set them (`pulumi config set --secret servingblueprints:kubeconfig ...` for a real run).
OFFLINE_PLACEHOLDER_SECRETS = ("servingblueprints:kubeconfig",)


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


@dataclass(frozen=True)
class PolicyVerdict:
    """One policy finding: `level` is `mandatory` (fails the preview) or `advisory`."""

    policy: str
    level: str
    resource: str
    message: str


@dataclass
class PreviewReport:
    """What `pulumi up` would create for one stack, computed offline, with its checks."""

    stack: str
    archetype: str
    resources: list[RegisteredResource]
    manifests: list[dict[str, Any]]
    outputs: dict[str, Any]
    blueprint: Blueprint = field(repr=False)
    manifest_problems: dict[str, list[str]] = field(default_factory=dict)
    policy_verdicts: list[PolicyVerdict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def mandatory_violations(self) -> list[PolicyVerdict]:
        return [v for v in self.policy_verdicts if v.level == "mandatory"]

    @property
    def clean(self) -> bool:
        """No invalid manifest and no mandatory policy violation."""
        return not self.manifest_problems and not self.mandatory_violations

    def to_json(self) -> dict[str, Any]:
        """`{"stack", "archetype", "region", "resources": [{"type", "name", "parent", "inputs"}], "manifests",
        "manifest_problems", "policy_verdicts", "warnings", "predictions", "outputs"}`."""
        return {
            "stack": self.stack,
            "archetype": self.archetype,
            "region": self.blueprint.region,
            "resources": [{k: v for k, v in asdict(r).items() if k in ("type", "name", "parent", "inputs")}
                          for r in self.resources],
            "manifests": self.manifests,
            "manifest_problems": self.manifest_problems,
            "policy_verdicts": [asdict(v) for v in self.policy_verdicts],
            "warnings": self.warnings,
            "predictions": self.blueprint.predictions.model_dump(mode="json"),
            "outputs": self.outputs,
        }


def _normalise(value: Any) -> Any:
    """Mock inputs arrive with every number as a float: give integral floats back as ints; drop None; sort keys."""
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


def run_under_mocks(body: Callable[[], Any], *, stack: str, config: dict[str, str] | None = None,
                    secret_keys: list[str] | None = None) -> MockRun:
    """Run `body` as a Pulumi program under the mock engine (`preview=False`, so every apply runs).

    Args:
        body: builds resources; a dict it returns is resolved as outputs (like `pulumi.export`; anything else it
            returns is ignored). Stack exports made with `pulumi.export` are resolved too.
        stack: stack name the program sees (`pulumi.get_stack()`).
        config: engine config, `{"ns:key": "string or JSON"}`.
        secret_keys: config keys to treat as secrets.

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

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
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
                                                  ignore_changes=tuple(request.ignoreChanges)))
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
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=Monitor(mocks), logger=logger)
    outputs: dict[str, Any] = {}

    def program_body():
        returned = body()
        returned = returned if isinstance(returned, dict) else {}
        root = pulumi.runtime.get_root_resource()
        exported = {**dict(getattr(root, "outputs", {}) or {}), **returned}

        async def resolve():
            for key, value in exported.items():
                outputs[key] = _normalise(_unwrap_secrets(await pulumi.Output.from_input(value).future()))

        return resolve()

    _sync_await(run_pulumi_func(program_body))
    records.sort(key=lambda r: r.urn)
    return MockRun(records=records, outputs=outputs, warnings=sorted(set(warnings)))


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


def mock_outputs(typ: str, name: str, inputs: dict, *, region: str) -> tuple[str, dict]:
    """Realistic provider outputs for a mocked resource: ids, ARNs and names as AWS/Kubernetes would return them."""
    suffix = hashlib.sha256(name.encode()).hexdigest()[:7]
    state = dict(inputs)
    if typ.startswith("kubernetes:"):
        meta = dict(state.get("metadata") or {})
        meta.setdefault("name", f"{name}-{suffix}")
        state["metadata"] = meta
        return f"{meta.get('namespace', 'default')}/{meta['name']}", state
    service = typ.split(":")[1].split("/")[0] if typ.startswith("aws:") else ""
    if typ == "aws:s3/bucket:Bucket":
        bucket = inputs.get("bucket") or f"{name}-{suffix}"
        state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}", region=region,
                     bucketRegionalDomainName=f"{bucket}.s3.{region}.amazonaws.com")
        return bucket, state
    if typ == "aws:iam/role:Role":
        state.update(name=inputs.get("name") or f"{name}-{suffix}", arn=f"arn:aws:iam::{MOCK_ACCOUNT_ID}:role/{name}")
        return state["name"], state
    if typ == "aws:eks/cluster:Cluster":
        cluster = inputs.get("name") or f"{name}-{suffix}"
        state.update(name=cluster, arn=f"arn:aws:eks:{region}:{MOCK_ACCOUNT_ID}:cluster/{cluster}",
                     endpoint=f"https://{suffix.upper()}0000000000000000000000000.gr7.{region}.eks.amazonaws.com",
                     certificateAuthority={"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCm1vY2sKLS0tLS1FTkQ="},
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
        return {"id": vpc_id, "cidrBlock": "10.20.0.0/16", "ownerId": MOCK_ACCOUNT_ID, "state": "available",
                "arn": f"arn:aws:ec2:{region}:{MOCK_ACCOUNT_ID}:vpc/{vpc_id}", "default": False}
    if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
        return {"names": [f"{region}a", f"{region}b", f"{region}c"],
                "zoneIds": [f"{region[:2]}{region.split('-')[1][0]}1-az{i}" for i in (1, 2, 3)], "id": region}
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {"accountId": MOCK_ACCOUNT_ID, "arn": f"arn:aws:iam::{MOCK_ACCOUNT_ID}:user/preview",
                "userId": "AIDAPREVIEW", "id": MOCK_ACCOUNT_ID}
    if token == "aws:index/getRegion:getRegion":
        return {"name": region, "region": region, "id": region}
    if token == "aws:index/getPartition:getPartition":
        return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
    return {}


def _config_from_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """The stack file's config as the engine passes it: every value a string (objects as JSON); secrets masked."""
    data = load_yaml(path.read_text(encoding="utf-8"))
    config, secret_keys = {}, []
    for key, value in (data.get("config") or {}).items():
        key = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[key] = SECRET_PLACEHOLDER
            secret_keys.append(key)
        else:
            config[key] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    for key in OFFLINE_PLACEHOLDER_SECRETS:
        if key not in config:
            config[key] = SECRET_PLACEHOLDER
            secret_keys.append(key)
    return config, secret_keys


def run_preview(stack: str, *, stacks_dir: Path = Path("stacks"), program: Path = Path("__main__.py")) -> PreviewReport:
    """Run the Pulumi program for `stack` offline and report what it would create.

    Args:
        stack: stack name, e.g. `chat-assistant-prod` (reads `<stacks_dir>/Pulumi.<stack>.yaml`).
        stacks_dir: folder of stack configs. Defaults to `stacks`.
        program: the Pulumi program file. Defaults to `__main__.py`.

    Returns:
        A `PreviewReport` with resources sorted by URN and Kubernetes manifests in the same order.

    Raises:
        StackConfigError: the stack config is missing or invalid, or the program file is missing.
    """
    path = stack_config_path(stacks_dir, stack)
    if not path.exists():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
        raise StackConfigError(f"{path}: no such stack config; known stacks: {', '.join(known) or 'none'} "
                               "(run `blueprint plan` first)")
    bp = read_stack_config(path)
    if not program.exists():
        raise StackConfigError(f"{program}: Pulumi program not found; run from the project folder (with Pulumi.yaml)")
    config, secret_keys = _config_from_file(path)
    program_file = program.resolve()

    def program_body() -> None:  # the module's globals are not outputs; `pulumi.export` calls are
        runpy.run_path(str(program_file), run_name="__main__")

    import pulumi

    try:
        run = run_under_mocks(program_body, stack=stack, config=config, secret_keys=secret_keys)
    except pulumi.ConfigMissingError as exc:
        raise StackConfigError(f"{path}: the program needs config {exc.key!r}; set it with "
                               f"`pulumi config set{' --secret' if exc.secret else ''} {exc.key} <value> "
                               f"--stack {stack}`") from None
    manifests = [manifest(r) for r in run.records if is_manifest(r)]
    problems = {}
    for obj in manifests:
        found = validate_manifest(obj, kubernetes_version=bp.platform.kubernetes_version)
        if found:
            problems[manifest_id(obj)] = found
    return PreviewReport(stack=stack, archetype=bp.archetype.value, resources=run.records, manifests=manifests,
                         outputs=run.outputs, blueprint=bp, manifest_problems=problems, warnings=run.warnings)


def is_manifest(record: RegisteredResource) -> bool:
    """A Kubernetes object (not a Helm release, which is a bundle of objects rendered in the cluster)."""
    return record.custom and record.type.startswith("kubernetes:") and not record.type.startswith("kubernetes:helm.sh/")


def manifest(record: RegisteredResource) -> dict[str, Any]:
    """A Kubernetes resource's inputs as a plain manifest (apiVersion, kind, metadata first)."""
    inputs = dict(record.inputs)
    head = {k: inputs.pop(k) for k in ("apiVersion", "kind", "metadata") if k in inputs}
    head.setdefault("metadata", {}).setdefault("name", record.name)
    return {**head, **inputs}
