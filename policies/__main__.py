"""CrossGuard entry point: builds the policy pack from `policies.rules` (nothing else lives here).

Constructing `PolicyPack` starts the analyzer's gRPC server and blocks, so tests never import this file; they build
`ResourceValidationArgs` / `StackValidationArgs` and call `policies.rules.POLICIES` directly.
"""

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.rules import POLICIES

PolicyPack(name="servingblueprints-guardrails", policies=list(POLICIES), enforcement_level=EnforcementLevel.MANDATORY)
