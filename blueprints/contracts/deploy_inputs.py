"""What a stack needs beyond its generated stack config before `pulumi up`: the config keys the program requires
(`pulumi config set [--secret] <key> <value> --stack <stack>`), each with why and where the deploy workflow reads it.

One list for everyone: the program requires exactly these (a missing one fails `pulumi preview` at once, naming it,
instead of a sync Job's 401 or an Alertmanager without a receiver); the offline preview stands in a placeholder for
each missing one and names it; `blueprint stacks --json` gives them to `.github/workflows/deploy.yml`, which sets each
from the GitHub secret (or variable) `source_name` before `pulumi up`; README's "First real deploy" sets them by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blueprints.catalog.huggingface import gated
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.platform import PlatformConfig, PlatformKind
from blueprints.contracts.sections import Archetype
from blueprints.contracts.stackconfig import PROJECT, ROLES_ANYWHERE_CA_KEY
from blueprints.requirements.platform_file import ALERT_RECEIVER_SECRET_KEY

KUBECONFIG_KEY = f"{PROJECT}:kubeconfig"
HF_TOKEN_KEY = f"{PROJECT}:hfToken"


@dataclass(frozen=True)
class DeployInput:
    """One config key a stack's `pulumi up` needs set.

    Attributes:
        key: the namespaced config key.
        secret: set with `--secret` (never in plain config).
        why: what reads it, in a reviewer's words.
        source_name: the GitHub Actions secret (`secret`) or variable the deploy workflow sets it from.
    """

    key: str
    secret: bool
    why: str
    source_name: str

    def command(self, stack: str) -> str:
        """The `pulumi config set` command that sets it."""
        value = "<value>" if self.secret else '-- "$(cat <file>)"'
        return f"pulumi config set{' --secret' if self.secret else ''} {self.key} {value} --stack {stack}"


def _stack_id(stack: str) -> str:
    """`chat-assistant-prod` -> `CHAT_ASSISTANT_PROD` (a GitHub secret or variable name)."""
    return re.sub(r"[^A-Z0-9]", "_", stack.upper())


def deploy_inputs(subject: Blueprint | PlatformConfig) -> list[DeployInput]:
    """The config keys `pulumi up` of this stack needs besides its stack config, in a stable order."""
    if isinstance(subject, PlatformConfig):
        if subject.kind is PlatformKind.EKS and subject.alerting.receiver is not None:
            return [DeployInput(ALERT_RECEIVER_SECRET_KEY, True, f"the Alertmanager {subject.alerting.receiver.value} "
                                "receiver's URL (or PagerDuty routing key): every alert of the platform's services",
                                "ALERT_RECEIVER_URL")]
        return []
    bp = subject
    found = []
    if bp.platform.kind in ("existing-cluster", "edge-cluster"):
        found.append(DeployInput(KUBECONFIG_KEY, True, f"the {bp.platform.kind} the stack deploys to",
                                 f"KUBECONFIG_{_stack_id(bp.stack)}"))
    if bp.roles_anywhere is not None and bp.roles_anywhere.acm_pca_arn is None:
        found.append(DeployInput(ROLES_ANYWHERE_CA_KEY, False, "the PEM bundle of the CA issuing the pods' certificates "
                                 "(the IAM Roles Anywhere trust anchor)", f"ROLES_ANYWHERE_CA_BUNDLE_{_stack_id(bp.stack)}"))
    repos = [m.source_uri.removeprefix("hf://") for m in bp.models if gated(m.source_uri) is not None]
    if repos and bp.archetype is not Archetype.SAGEMAKER_ENDPOINT:  # SageMaker runs no sync Job
        found.append(DeployInput(HF_TOKEN_KEY, True, f"the weights sync Job downloads gated {', '.join(repos)} (the "
                                 "token of a Hugging Face account that accepted its conditions; without it: 401)",
                                 "HF_TOKEN"))
    return found
