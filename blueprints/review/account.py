"""Service quotas per AWS account and Region, not per stack (`blueprint preflight`).

A quota (EC2 vCPUs of an instance family group, SageMaker endpoint instances) is shared by every stack deployed into
one account and Region, so a stack's own need can fit while the stacks beside it use the rest. The account of a stack
is its environment's policy config (`blueprints.review.stack.policy_config_for`: `policies/config/<env>.json`)
[assumption: one AWS account per policy config, the usual account-per-environment layout]; every stack config in the
folder (platforms, services, both parts of a compound service) with that policy config counts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.stackconfig import read_config, stack_config_path
from blueprints.core.errors import StackConfigError
from blueprints.core.memo import remembered
from blueprints.plan.guardrails import Guardrails
from blueprints.plan.quota import QuotaCheck, QuotaNeed, gpus_at_full_scale, quota_needs, summed_needs
from blueprints.requirements.service import Requirements
from blueprints.review.stack import POLICY_CONFIG_DIR, policy_config_for
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


#: Stack configs `_service_stacks` has read, by path and exact bytes: every plan reads every stack config of its
#: folder, and `plan --check` plans each requirements file of the project, so it parses the same unchanged files over
#: and over. Keyed on the content itself, an edited file is parsed again; only valid reads are kept; the subjects are
#: read, never changed, by the callers here. Bounded: cleared at `_READS_KEPT` entries.
_reads: dict[tuple[str, bytes], Blueprint | PlatformConfig] = {}
_READS_KEPT = 512


def _read_config(path: Path) -> Blueprint | PlatformConfig:
    """`read_config(path)`, parsed once per content (`_reads`). Raises `StackConfigError` as `read_config`."""
    try:
        key = (str(path.resolve()), path.read_bytes())
    except OSError:
        return read_config(path)  # names what is wrong with the file
    return remembered(_reads, key, lambda: read_config(path), kept=_READS_KEPT)


def _service_stacks(stacks_dir: Path, *, skip_service: str | None = None) -> list[Blueprint]:
    """The service stack configs in `stacks_dir` (platforms have no GPUs of a quota's kind), except `skip_service`'s
    and, with it (a plan), pilot stacks (`blueprint pilot`): a plan, and `plan --check`, stay what they are while
    pilots come and go; preflight (without) counts them with every other stack of the account.

    With `skip_service` (a plan, which rewrites that service's stacks), an invalid stack config is left out: its own
    preview and `plan --check` refuse it, and it must not stop another service's plan. Without (preflight, which
    answers for the account), it is an error.

    Raises:
        StackConfigError: without `skip_service`, a stack config is invalid (the message names it).
    """
    found: list[Blueprint] = []
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")) if stacks_dir.is_dir() else []:
        try:
            subject = _read_config(path)
        except StackConfigError as exc:
            if skip_service is not None:
                continue
            raise StackConfigError(f"{exc} (every stack of an account counts against its GPU quota, gpu-quota "
                                   "maxGpus; fix or re-plan it)") from None
        if isinstance(subject, PlatformConfig) or (skip_service is not None and subject.pilot is not None):
            continue  # a plan is not shaped by pilots, which live for hours (`blueprint preflight` counts them)
        if skip_service is None or (subject.pipeline.service if subject.pipeline else subject.service) != skip_service:
            found.append(subject)
    return found


def _account_of(bp: Blueprint, policy_dir: Path) -> Path:
    return policy_config_for(bp.environment, production=bp.production, config_dir=policy_dir)


def with_account_gpus(req: Requirements, limits: dict[str, Guardrails], stacks_dir: Path, *,
                      policy_dir: Path = POLICY_CONFIG_DIR) -> dict[str, Guardrails]:
    """Each environment's guardrails with the GPUs the account's other stacks in its Region reach at full scale
    (`Guardrails.gpus_in_use`): the committed service stack configs in `stacks_dir` with the same policy config and
    Region, except the stacks `req` itself plans (they are about to be rewritten), each at `gpus_at_full_scale`.
    The plan then keeps the account within `maxGpus` (`blueprints.plan.guardrails.SearchLimits.breach`); the stack
    planned first in an account takes its GPUs first, as at `pulumi up`.

    An invalid stack config of another service is left out (`_service_stacks`).
    """
    others = _service_stacks(stacks_dir, skip_service=req.service)
    out = dict(limits)
    for env, g in limits.items():
        if g.max_gpus is None:
            continue
        account = policy_config_for(env, production=req.is_production(env), config_dir=policy_dir)
        using = [(bp.stack, gpus) for bp in others
                 if bp.region == req.environments[env].region and _account_of(bp, policy_dir) == account
                 and (gpus := gpus_at_full_scale(bp))]
        if using:
            out[env] = replace(g, gpus_in_use=sum(n for _, n in using),
                               gpus_in_use_by=tuple(f"{stack}: {n}" for stack, n in using))
    return out


def account_gpu_checks(stacks: list[str], stacks_dir: Path, *,
                       policy_dir: Path = POLICY_CONFIG_DIR) -> list[QuotaCheck]:
    """The `gpu-quota` policy per account and Region for `stacks` (one stack, or a compound service's parts): the
    GPUs every service stack of the same policy config reaches there at full scale (`gpus_at_full_scale`) against
    its `maxGpus` (a mandatory policy only), as `QuotaCheck`s (service_code `policy`, value maxGpus, source the
    policy config). Empty for stacks without GPUs.

    Raises:
        StackConfigError: a stack config in `stacks_dir` is invalid.
        BlueprintError: the policy config is invalid.
    """
    from blueprints.core.project import project_relative
    from blueprints.review.policy_pack import guardrails, read_policy_config

    every = _service_stacks(stacks_dir)
    checks, seen = [], set()
    for bp in (b for b in every if b.stack in stacks and gpus_at_full_scale(b)):
        account = _account_of(bp, policy_dir)
        if (account, bp.region) in seen or not account.exists():
            continue
        seen.add((account, bp.region))
        cap = guardrails(read_policy_config(account), source=project_relative(account)).max_gpus
        if cap is None:
            continue
        using = [(b.stack, n) for b in every if b.region == bp.region and _account_of(b, policy_dir) == account
                 and (n := gpus_at_full_scale(b))]
        total = sum(n for _, n in using)
        need = QuotaNeed("policy", "gpu-quota", f"maxGpus of {project_relative(account)}", bp.region, float(total),
                         "GPUs", "GPUs at full scale, every stack of the account in the Region: "
                         + ", ".join(f"{s} {n}" for s, n in using))
        checks.append(QuotaCheck(need, float(cap), project_relative(account)))
    return checks
