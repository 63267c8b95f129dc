"""Service quotas per AWS account and Region, not per stack (`blueprint preflight`).

A quota (EC2 vCPUs of an instance family group, SageMaker endpoint instances) is shared by every stack deployed into
one account and Region, so a stack's own need can fit while the stacks beside it use the rest. The account of a stack
is its environment's policy config (`blueprints.review.stack.policy_config_for`: `policies/config/<env>.json`)
[assumption: one AWS account per policy config, the usual account-per-environment layout]; every stack config in the
folder (platforms, services, both parts of a compound service) with that policy config counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from blueprints.contracts.stackconfig import read_config, stack_config_path
from blueprints.plan.quota import QuotaNeed, quota_needs, summed_needs
from blueprints.review.stack import POLICY_CONFIG_DIR
from blueprints.review.stacks import list_stacks


@dataclass(frozen=True)
class AccountNeed:
    """One quota: what the stack (or compound service) asked about needs, and what every stack of its account needs
    in that Region together (`total`, checked against the quota), with those stacks."""

    own: QuotaNeed
    total: QuotaNeed
    stacks: tuple[str, ...]
    account: str

    def to_json(self) -> dict:
        return {**self.total.to_json(), "stack_needed": self.own.needed, "stacks": list(self.stacks),
                "account": self.account}


def account_needs(stacks: list[str], stacks_dir: Path, *, policy_dir: Path = POLICY_CONFIG_DIR) -> list[AccountNeed]:
    """The quotas `stacks` (one stack, or a compound service's parts) need, each beside the total every stack of the
    same account needs in that Region at full scale (`quota_needs`, added up with `summed_needs`).

    Raises:
        StackConfigError: a stack config in `stacks_dir` is invalid (`blueprints.review.stacks.list_stacks`).
    """
    refs = list_stacks(stacks_dir, policy_dir=policy_dir)
    account = next(r.policy_config for r in refs if r.stack == stacks[0])
    own = summed_needs([(s, n) for s in stacks for n in quota_needs(read_config(stack_config_path(stacks_dir, s)))])
    peers = [r.stack for r in refs if r.policy_config == account]
    every = [(s, n) for s in peers for n in quota_needs(read_config(stack_config_path(stacks_dir, s)))]
    totals = {(n.service_code, n.quota_code, n.region): n for n in summed_needs(every)}
    out = []
    for need in own:
        key = (need.service_code, need.quota_code, need.region)
        using = tuple(s for s, n in every if (n.service_code, n.quota_code, n.region) == key)
        out.append(AccountNeed(need, totals[key], using, account))
    return out
