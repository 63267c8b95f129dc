"""What a deployed stack gives `verify` and `benchmark`: its outputs (through the Pulumi CLI, or a file of them), the
Kubernetes API (through a kubeconfig: the platform stack's `kubeconfig` output, which authenticates with
`aws eks get-token` as `aws eks update-kubeconfig` would write it, or one given), and AWS (boto3's credential chain).

Each access that is missing raises `DeployedStackError` (exit 2) saying what the command needs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from blueprints.contracts.blueprint import Blueprint
from blueprints.core.errors import DeployedStackError, read_text_file
from blueprints.core.yamlio import load_json

#: Seconds the Pulumi CLI may take to print a stack's outputs (it reads the backend).
PULUMI_TIMEOUT_S = 120
#: Seconds the first Kubernetes API call may take (an EKS token is fetched first).
KUBE_TIMEOUT_S = 30
#: Largest outputs file read, bytes.
MAX_OUTPUTS_BYTES = 4 * 1024 * 1024

#: `run(args) -> stdout`: runs the Pulumi CLI (`pulumi <args>`); raises DeployedStackError.
PulumiRunner = Callable[[list[str]], str]


def pulumi_cli(cwd: Path | None) -> PulumiRunner:
    """Run the Pulumi CLI in the project folder (`cwd`), bounded by `PULUMI_TIMEOUT_S`."""

    def run(args: list[str]) -> str:
        try:
            done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=cwd, capture_output=True, text=True,
                                  timeout=PULUMI_TIMEOUT_S, check=False)
        except FileNotFoundError:
            raise DeployedStackError("the Pulumi CLI is not on PATH: this command reads the deployed stack's "
                                     "outputs with `pulumi stack output`; install it and `pulumi login` to the "
                                     "stack's backend, or pass --outputs FILE (what `pulumi stack output --json "
                                     "--show-secrets --stack <stack>` prints)") from None
        except subprocess.TimeoutExpired:
            raise DeployedStackError(f"`pulumi {' '.join(args)}` did not answer within {PULUMI_TIMEOUT_S} s") \
                from None
        if done.returncode != 0:
            reason = (done.stderr or done.stdout).strip().splitlines()
            raise DeployedStackError(f"`pulumi {' '.join(args)}` failed: {reason[-1][:300] if reason else 'no output'}"
                                     "; log in to the backend holding the stack (`pulumi login`), or pass --outputs "
                                     "FILE")
        return done.stdout

    return run


def _outputs_of(text: str, where: str) -> dict[str, Any]:
    try:
        data = load_json(text)
    except json.JSONDecodeError as exc:
        raise DeployedStackError(f"{where}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise DeployedStackError(f"{where}: expected a JSON object of stack outputs, got {type(data).__name__}")
    return data


def stack_outputs(stack: str, *, outputs_file: Path | None, pulumi: PulumiRunner) -> dict[str, Any]:
    """The stack's outputs with secrets shown: from `outputs_file` (JSON, as `pulumi stack output --json
    --show-secrets` prints it), else the Pulumi CLI.

    Raises:
        DeployedStackError: no Pulumi CLI or backend access, an unreadable file, or a stack with no outputs (not
            deployed yet).
    """
    if outputs_file is not None:
        text = read_text_file(outputs_file, DeployedStackError, "--outputs file")
        if len(text.encode("utf-8")) > MAX_OUTPUTS_BYTES:
            raise DeployedStackError(f"--outputs {outputs_file}: larger than {MAX_OUTPUTS_BYTES:,} bytes")
        outputs = _outputs_of(text, f"--outputs {outputs_file}")
    else:
        outputs = _outputs_of(pulumi(["stack", "output", "--json", "--show-secrets", "--stack", stack]),
                              f"`pulumi stack output --stack {stack}`")
    if not outputs:
        raise DeployedStackError(f"{stack} has no outputs: deploy it first (`pulumi up --stack {stack}`)")
    return outputs


def require_output(outputs: dict[str, Any], key: str, stack: str) -> Any:
    """An output the command needs; DeployedStackError naming it when the stack lacks it."""
    value = outputs.get(key)
    if value in (None, "", "[secret]"):
        raise DeployedStackError(f"{stack}: stack output {key!r} is missing (or hidden: outputs need "
                                 "--show-secrets); is the stack deployed with this version of the program?")
    return value


def kube_api_client(bp: Blueprint, *, kubeconfig: Path | None, context: str | None,
                    pulumi: PulumiRunner) -> Any:
    """A `kubernetes.client.ApiClient` for the cluster the stack runs on, checked with one call.

    Args:
        bp: the stack's blueprint.
        kubeconfig: a kubeconfig file. Defaults to the platform stack's `kubeconfig` output (EKS platforms; it runs
            `aws eks get-token`, so AWS credentials are needed); an existing or edge cluster needs this file.
        context: the kubeconfig context. Defaults to its current context.
        pulumi: runs the Pulumi CLI.

    Raises:
        DeployedStackError: no kubeconfig, or the API server is unreachable or refuses the credentials.
    """
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError as Urllib3Error

    try:
        if kubeconfig is not None:
            api = config.new_client_from_config(config_file=str(kubeconfig), context=context)
        elif bp.platform.kind == "eks" and bp.platform.stack:
            text = pulumi(["stack", "output", "kubeconfig", "--show-secrets", "--stack", bp.platform.stack])
            api = config.new_client_from_config_dict(_outputs_of(text, f"{bp.platform.stack} output kubeconfig"),
                                                     context=context)
        else:
            raise DeployedStackError(f"{bp.stack} runs on an {bp.platform.kind}: pass --kubeconfig FILE (and "
                                     "--context) for its cluster")
    except (ConfigException, OSError) as exc:
        raise DeployedStackError(f"cannot load the kubeconfig ({exc}); pass --kubeconfig FILE") from None
    try:
        client.VersionApi(api).get_code(_request_timeout=KUBE_TIMEOUT_S)
    except (ApiException, Urllib3Error, ConfigException, OSError) as exc:
        status = getattr(exc, "status", None)
        why = f"{status} {getattr(exc, 'reason', '')}".strip() if status else (str(exc).splitlines() or [""])[0]
        raise DeployedStackError(f"cannot reach the Kubernetes API of {bp.stack}'s cluster ({why[:300]}): verify "
                                 "needs network access to the API server (a private cluster: run from its VPC's "
                                 "runner) and credentials it accepts (EKS: AWS credentials of a role with an access "
                                 "entry)") from None
    return api


def aws_session(bp: Blueprint) -> Any:
    """A boto3 session in the stack's region; DeployedStackError when boto3 finds no credentials."""
    import boto3

    session = boto3.Session(region_name=bp.region)
    if session.get_credentials() is None:
        raise DeployedStackError(f"no AWS credentials: checking {bp.stack} needs credentials allowed "
                                 "sagemaker:DescribeEndpoint, sagemaker:InvokeEndpoint and "
                                 "cloudwatch:DescribeAlarms (environment, profile or role)")
    return session


def object_reader(api: Any):
    """`read(group, version, plural, namespace, name) -> dict` over the Kubernetes API (custom objects, and the HPA
    of `autoscaling/v2`); LookupError for a 404."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(api)
    hpas = client.AutoscalingV2Api(api)

    def read(group: str, version: str, plural: str, namespace: str | None, name: str) -> dict[str, Any]:
        try:
            if (group, plural) == ("autoscaling", "horizontalpodautoscalers"):
                return api.sanitize_for_serialization(hpas.read_namespaced_horizontal_pod_autoscaler(
                    name, namespace, _request_timeout=KUBE_TIMEOUT_S))
            if namespace is None:
                return custom.get_cluster_custom_object(group, version, plural, name, _request_timeout=KUBE_TIMEOUT_S)
            return custom.get_namespaced_custom_object(group, version, namespace, plural, name,
                                                       _request_timeout=KUBE_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                raise LookupError(name) from None
            raise DeployedStackError(f"the Kubernetes API refused reading {plural}/{name} ({exc.status} "
                                     f"{exc.reason}): verify needs read access to it") from None

    return read


def node_lister(api: Any):
    """`list_nodes(label_selector) -> [node dict]` over the Kubernetes API."""
    from kubernetes import client

    core = client.CoreV1Api(api)

    def list_nodes(selector: str) -> list[dict[str, Any]]:
        return api.sanitize_for_serialization(core.list_node(label_selector=selector,
                                                             _request_timeout=KUBE_TIMEOUT_S)).get("items", [])

    return list_nodes
