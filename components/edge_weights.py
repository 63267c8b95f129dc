"""Weights on an edge cluster: no model store, no EKS Pod Identity, never static keys.

- `s3://` sources: IAM Roles Anywhere. `EdgeWeightsAccess` creates a trust anchor on your CA (an ACM Private CA, or
  the PEM bundle in `servingblueprints:rolesAnywhereCaBundle`), a role trusted by `rolesanywhere.amazonaws.com`
  (`sts:AssumeRole`, `sts:TagSession`, `sts:SetSourceIdentity`) only through that trust anchor and only for the
  certificate subject CN the plan names, allowed only to read the sources' prefixes, and a profile for it (IAM Roles
  Anywhere user guide, "Trust model" and "Attribute mapping and trust policy"; pulumi-aws 7.51 `rolesanywhere`). Each
  pod runs the AWS signing helper (`aws_signing_helper serve`, the official multi-arch image) as a native sidecar
  with the certificate of a Secret you provide; the AWS CLI reads its credentials from the helper's IMDSv2-compatible
  endpoint on 127.0.0.1 (`AWS_EC2_METADATA_SERVICE_ENDPOINT`).
- `https://` sources: each pod downloads the file with curl (HTTPS only) and refuses it unless its SHA-256 matches the
  plan's `sha256`.

Triton and ONNX Runtime read a local model repository: the weights go into `<model>/1/` and each model's
`config.pbtxt` comes from the stack's ConfigMap (there is no bucket to hold it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype, ServedModel
from blueprints.contracts.blueprint import Blueprint
from blueprints.requirements.model import MODEL_FILE, ModelFormat
from components.labels import recommended_labels
from blueprints.contracts.placement import copy_resources
from components.naming import ROLE, fit
from components.weights_delivery import HF_ONNX_FOLDER, MODELS_MOUNT, models_volume, region_env
from components.weights_sync import source_read_statements

ROLES_ANYWHERE_PRINCIPAL = "rolesanywhere.amazonaws.com"
CERTIFICATE_VOLUME = "roles-anywhere-certificate"
CERTIFICATE_MOUNT = "/var/run/roles-anywhere"
REPOSITORY_VOLUME = "model-repository"
REPOSITORY_MOUNT = "/etc/model-repository"
#: The IMDS endpoint the AWS CLI reads when the helper serves it (botocore's AWS_EC2_METADATA_SERVICE_ENDPOINT).
IMDS_ENDPOINT = f"http://127.0.0.1:{defaults.CREDENTIAL_HELPER_PORT}"
#: Archetypes whose server reads a Triton model repository (config.pbtxt beside `1/`).
_REPOSITORY_ARCHETYPES = (Archetype.ONNX_CPU, Archetype.TRITON_MULTI_MODEL)

_ONNX = MODEL_FILE[ModelFormat.ONNX]
#: Seconds the download waits for the signing helper's first credentials (it signs a session before it listens).
HELPER_WAIT_S = 120
#: The helper listens on 127.0.0.1 only (processes.yaml): no kubelet probe can see it start, so the download itself
#: waits until the AWS CLI resolves credentials from it (`aws configure export-credentials`: the credential chain,
#: no AWS API call), then copies.
_S3_SCRIPT = (f'set -e; n=0; until aws configure export-credentials >/dev/null 2>&1; do n=$((n + 2)); '
              f'if [ "$n" -gt {HELPER_WAIT_S} ]; then echo "no credentials from the IAM Roles Anywhere helper on '
              f'127.0.0.1 after {HELPER_WAIT_S} s" >&2; exit 1; fi; sleep 2; done; '
              'aws s3 sync "$1" "$2" --no-progress --only-show-errors; '
              # A Hugging Face layout keeps onnx/model.onnx: move it into the version folder (REPOSITORY_LAYOUT).
              f'if [ ! -e "$2/{_ONNX}" ] && [ -e "$2/{HF_ONNX_FOLDER}/{_ONNX}" ]; then mv "$2/{HF_ONNX_FOLDER}/"* "$2/"; fi; '
              'if [ "$#" -ge 4 ]; then cp "$3" "$4"; fi')
_HTTPS_SCRIPT = ('set -e; mkdir -p "$(dirname "$2")"; curl -fsSL --proto =https --retry 3 -o "$2.part" "$1"; '
                 'echo "$3  $2.part" | sha256sum -c -; mv "$2.part" "$2"; '
                 'if [ "$#" -ge 5 ]; then cp "$4" "$5"; fi')


def trust_policy(trust_anchor_arn: str, common_name: str) -> str:
    """The role's trust policy: IAM Roles Anywhere may assume it, tag the session and set its source identity, only
    through this trust anchor (`aws:SourceArn`) and only for a certificate whose subject CN is `common_name`."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": ROLES_ANYWHERE_PRINCIPAL},
        "Action": ["sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"],
        "Condition": {"ArnEquals": {"aws:SourceArn": [trust_anchor_arn]},
                      "StringEquals": {"aws:PrincipalTag/x509Subject/CN": common_name}}}]}, sort_keys=True)


def read_sources_policy(models: list[ServedModel]) -> str:
    """Read-only access to exactly the `s3://` sources' prefixes (GetObject, ListBucket limited to them)."""
    return json.dumps({"Version": "2012-10-17", "Statement": source_read_statements(models)}, sort_keys=True)


def version_folder(bp: Blueprint, model: ServedModel) -> str:
    """Where a model's weights go in the pod: `/models/<name>/1` in a Triton repository, else `/models/<name>`."""
    base = f"{MODELS_MOUNT}/{model.name}"
    return f"{base}/1" if bp.archetype in _REPOSITORY_ARCHETYPES else base


@dataclass
class EdgeDelivery:
    """The init containers and volumes of an edge cluster's serving pods (see the module docstring).

    Attributes:
        trust_anchor_arn, profile_arn, role_arn: IAM Roles Anywhere (None without `s3://` sources).
        repository_config_map: the ConfigMap of `config.pbtxt`s (None for archetypes without a Triton repository).
    """

    trust_anchor_arn: pulumi.Input[str] | None = None
    profile_arn: pulumi.Input[str] | None = None
    role_arn: pulumi.Input[str] | None = None
    repository_config_map: pulumi.Input[str] | None = None

    def _helper(self, bp: Blueprint) -> dict:
        ra = bp.roles_anywhere
        if ra is None or self.role_arn is None:
            raise ValueError(f"{bp.stack}: s3:// sources on an edge cluster need IAM Roles Anywhere (re-plan)")
        resources = dict(defaults.CREDENTIAL_HELPER_RESOURCES)
        return {
            "name": "aws-credentials",
            "image": defaults.CREDENTIAL_HELPER_IMAGE,
            # A native sidecar: started before the download, kept while the pod runs (Kubernetes >= 1.29).
            "restartPolicy": "Always",
            "command": ["/usr/local/bin/aws_signing_helper"],
            "args": ["serve", "--certificate", f"{CERTIFICATE_MOUNT}/tls.crt",
                     "--private-key", f"{CERTIFICATE_MOUNT}/tls.key",
                     "--trust-anchor-arn", self.trust_anchor_arn, "--profile-arn", self.profile_arn,
                     "--role-arn", self.role_arn, "--region", bp.region,
                     "--session-duration", str(ra.session_duration_s),
                     "--port", str(defaults.CREDENTIAL_HELPER_PORT)],
            "resources": {"requests": resources, "limits": resources},
            # No probe: it listens on 127.0.0.1 only, where the kubelet's probes (to the pod IP) never reach; the
            # download waits for its credentials instead (`_S3_SCRIPT`).
            "volumeMounts": [{"name": CERTIFICATE_VOLUME, "mountPath": CERTIFICATE_MOUNT, "readOnly": True}],
        }

    def _fetch(self, bp: Blueprint, model: ServedModel) -> dict:
        folder = version_folder(bp, model)
        config = ([f"{REPOSITORY_MOUNT}/{model.name}.pbtxt", f"{MODELS_MOUNT}/{model.name}/config.pbtxt"]
                  if self.repository_config_map is not None else [])
        requests = copy_resources([model.weights_gib])
        container: dict = {
            "name": f"fetch-{model.name}"[:63].rstrip("-"),
            "resources": {"requests": requests, "limits": {**requests, "cpu": "2"}},
            "volumeMounts": [{"name": "models", "mountPath": MODELS_MOUNT},
                             *([{"name": REPOSITORY_VOLUME, "mountPath": REPOSITORY_MOUNT, "readOnly": True}]
                               if config else [])],
        }
        if model.source_uri.startswith("s3://"):
            return {**container, "image": defaults.AWS_CLI_IMAGE,
                    "command": ["/bin/sh", "-c", _S3_SCRIPT, "fetch-weights", model.source_uri, folder, *config],
                    "env": [*region_env(bp.region), {"name": "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                                                     "value": IMDS_ENDPOINT}]}
        if model.source_uri.startswith("https://") and model.sha256:
            file_name = MODEL_FILE.get(model.format)
            if file_name is None:
                raise ValueError(f"{bp.stack}: model {model.name}: an https:// source is one file, which Triton "
                                 f"loads for formats {sorted(f.value for f in MODEL_FILE)}, not {model.format.value}")
            return {**container, "image": defaults.CURL_IMAGE,
                    "command": ["/bin/sh", "-c", _HTTPS_SCRIPT, "fetch-weights", model.source_uri,
                                f"{folder}/{file_name}", model.sha256, *config]}
        raise ValueError(f"{bp.stack}: model {model.name}: an edge cluster reads s3:// sources or https:// sources "
                         f"with a sha256, not {model.source_uri}")

    def init_containers(self, bp: Blueprint, models: list[ServedModel]) -> list[dict]:
        helper = [self._helper(bp)] if any(m.source_uri.startswith("s3://") for m in models) else []
        return [*helper, *(self._fetch(bp, m) for m in models)]

    def volumes(self, bp: Blueprint, models: list[ServedModel]) -> list[dict]:
        volumes = [models_volume(models)]
        if any(m.source_uri.startswith("s3://") for m in models) and bp.roles_anywhere is not None:
            volumes.append({"name": CERTIFICATE_VOLUME, "secret": {
                "secretName": bp.roles_anywhere.certificate_secret, "defaultMode": 0o440,
                "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}})
        if self.repository_config_map is not None:
            volumes.append({"name": REPOSITORY_VOLUME, "configMap": {"name": self.repository_config_map,
                                                                      "defaultMode": 0o444}})
        return volumes


@dataclass
class EdgeWeightsAccessArgs:
    """Inputs of `EdgeWeightsAccess`.

    Args:
        blueprint: an edge-cluster blueprint.
        namespace: the service's namespace (the repository ConfigMap goes there).
        repository_configs: `{model name: config.pbtxt}` for Triton-repository archetypes
            (`components.triton_service.repository_configs`); empty otherwise.
        ca_bundle: the trust anchor's CA certificate bundle (PEM), when the plan names no ACM Private CA
            (`servingblueprints:rolesAnywhereCaBundle`).
    """

    blueprint: Blueprint
    namespace: pulumi.Input[str]
    repository_configs: dict[str, str]
    ca_bundle: pulumi.Input[str] | None = None


class EdgeWeightsAccess(pulumi.ComponentResource):
    """IAM Roles Anywhere (trust anchor, role read-only on the sources, profile) for `s3://` sources, and the model
    repository ConfigMap, for an edge cluster's serving pods.

    Outputs: `trust_anchor_arn`, `profile_arn`, `role_arn` (None without `s3://` sources), `repository_config_map`.
    """

    def __init__(self, name: str, args: EdgeWeightsAccessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:EdgeWeightsAccess", name, None, opts)
        bp = args.blueprint
        if bp.platform.kind != "edge-cluster":
            raise ValueError(f"EdgeWeightsAccess is for edge clusters; {bp.stack} is on {bp.platform.kind}")
        child = pulumi.ResourceOptions(parent=self)
        self.trust_anchor = self.role = self.profile = self.repository = None
        ra = bp.roles_anywhere
        if ra is not None:
            s3_models = [m for m in bp.models if m.source_uri.startswith("s3://")]
            if ra.acm_pca_arn:
                source = {"source_type": "AWS_ACM_PCA", "source_data": {"acm_pca_arn": ra.acm_pca_arn}}
            elif args.ca_bundle is not None:
                source = {"source_type": "CERTIFICATE_BUNDLE", "source_data": {"x509_certificate_data": args.ca_bundle}}
            else:
                raise ValueError(f"{bp.stack}: IAM Roles Anywhere needs your CA: set servingblueprints:"
                                 "rolesAnywhereCaBundle (a PEM bundle) or operations.roles_anywhere.acm_pca_arn")
            self.trust_anchor = aws.rolesanywhere.TrustAnchor(f"{name}-trust-anchor", name=bp.stack, enabled=True,
                                                               source=source, tags=bp.tags, opts=child)
            self.role = aws.iam.Role(
                fit(name, "role", ROLE),
                description=f"{bp.stack}: read of its models' sources through IAM Roles Anywhere",
                assume_role_policy=self.trust_anchor.arn.apply(
                    lambda arn: trust_policy(arn, ra.certificate_common_name)),
                max_session_duration=max(3600, ra.session_duration_s), tags=bp.tags, opts=child)
            aws.iam.RolePolicy(f"{name}-read-sources", role=self.role.id, policy=read_sources_policy(s3_models),
                               opts=child)
            self.profile = aws.rolesanywhere.Profile(f"{name}-profile", name=bp.stack, enabled=True,
                                                     role_arns=[self.role.arn],
                                                     duration_seconds=ra.session_duration_s, tags=bp.tags, opts=child)
        if args.repository_configs:
            self.repository = k8s.core.v1.ConfigMap(
                f"{name}-repository", metadata={"name": f"{bp.service}-model-repository", "namespace": args.namespace,
                                                "labels": recommended_labels(name=bp.engine.kind, instance=bp.stack,
                                                                             component="model-repository")},
                data={f"{model}.pbtxt": text for model, text in sorted(args.repository_configs.items())}, opts=child)
        self.delivery = EdgeDelivery(
            trust_anchor_arn=self.trust_anchor.arn if self.trust_anchor else None,
            profile_arn=self.profile.arn if self.profile else None,
            role_arn=self.role.arn if self.role else None,
            repository_config_map=self.repository.metadata.name if self.repository else None)
        self.register_outputs({"trust_anchor_arn": self.delivery.trust_anchor_arn,
                               "profile_arn": self.delivery.profile_arn, "role_arn": self.delivery.role_arn,
                               "repository_config_map": self.delivery.repository_config_map})
