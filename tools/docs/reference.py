"""The documentation site's reference pages, generated from the objects they describe.

Each function returns markdown for one `<!-- generated: NAME -->` marker of a page under docs/ (`tools/docs/hooks.py`
puts it in at build time), so a field, flag, config key or rule cannot be missing from the site or outlive the code:

- `requirements`: every field of `blueprint schema` (`requirements_json_schema()`), with its type, default, bounds and
  description, and the cross-field rules the schema lists under `x-cross-field-rules`;
- `platform-yaml`: the same for `blueprint schema --platform` (`platform_json_schema()`);
- `stack-config-keys`: every config key a stack config may hold (`stackconfig.PROJECT_KEYS`, `REGION_KEY`), each with
  its meaning from `CONFIG_KEY_MEANINGS` (a key without one, or a meaning for a key the code no longer has, fails);
- `blueprint`, `platform-config`, `plan-record`: the fields of `servingblueprints:blueprint` (`Blueprint`),
  `servingblueprints:platform` (`PlatformConfig`) and `servingblueprints:planned` (`PlanRecord`);
- `cli`: every command of `blueprint` (the typer app as click sees it) with its arguments and options;
- `policies`: every rule of the policy pack (`policies.rules.RULES`) with its level per environment
  (`policies/config/<env>.json`), its description and config keys;
- `signals`: every scaling signal and alert the stacks use (`blueprints.catalog.signals.SIGNALS`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]

#: The meaning of each config key a stack config may hold besides the plan's (`blueprint`, `platform`, `planned`,
#: `aws:region`, `clusterAddons`, written by `blueprint plan`). Keys are checked against the code's list.
CONFIG_KEY_MEANINGS: dict[str, str] = {
    "aws:region": "the stack's AWS Region, written by `blueprint plan` (the requirements' region of the environment)",
    "servingblueprints:blueprint": "a service stack's plan: the `Blueprint` below, written by `blueprint plan`",
    "servingblueprints:platform": "a platform stack's plan: the `PlatformConfig` below, written by `blueprint plan`",
    "servingblueprints:planned": "what the stack config was planned from: the `PlanRecord` below (requirements file "
                                 "or folder, plan date, digest of the planned values), read by `blueprint plan --check`",
    "servingblueprints:platformStack": "where the platform stack a service reads is (`<org>/<project>/<stack>`, another "
                                      "organisation or project); its stack must be the blueprint's planned platform "
                                      "(`blueprint.platform.stack`), else the preview and the program refuse it (exit "
                                      "2); default: this org and project",
    "servingblueprints:kubeconfig": "(secret) `existing-cluster` and `edge-cluster`: the cluster's kubeconfig "
                                    "(`pulumi config set --secret`); the offline preview stands in a placeholder",
    "servingblueprints:clusterName": "`existing-cluster` only: its EKS name, to bind the serving and sync "
                                     "ServiceAccounts with EKS Pod Identity",
    "servingblueprints:clusterAddons": "`existing-cluster` and `edge-cluster`: add-on ids the cluster runs (written by "
                                       "`plan` from `operations.cluster_addons`)",
    "servingblueprints:rolesAnywhereCaBundle": "`edge-cluster` with `s3://` sources and no "
                                               "`operations.roles_anywhere.acm_pca_arn`: the PEM bundle of the CA that "
                                               "issues the pods' certificates (the IAM Roles Anywhere trust anchor; not "
                                               "a secret: `pulumi config set servingblueprints:rolesAnywhereCaBundle "
                                               "-- \"$(cat ca.pem)\"`); the offline preview stands in a placeholder",
    "servingblueprints:apiKey": "(secret) the self-hosted endpoint's API key (`pulumi config set --secret "
                                "servingblueprints:apiKey ...`); default: a pulumi-random key generated per stack, read "
                                "with `pulumi stack output api_key --show-secrets`",
    "servingblueprints:hfToken": "(secret) Hugging Face token for the weights sync Job; required (the program fails "
                                 "without it, the preview names it) for a gated `hf://` model "
                                 "(`blueprints/catalog/huggingface.yaml`: the Llama examples)",
    "servingblueprints:prometheusUrl": "`existing-cluster` only: the Prometheus KEDA queries (default: "
                                       "kube-prometheus-stack's service in `monitoring`)",
    "servingblueprints:alarmTopicArn": "an SNS topic the SageMaker alarms notify; default: the plan's (platform.yaml "
                                       "`alerting.sns_topic_arns` of the region)",
    "servingblueprints:alertReceiverUrl": "(secret) platform stacks with `alerting.receiver`: the Slack incoming "
                                          "webhook, webhook URL or PagerDuty routing key (`pulumi config set "
                                          "--secret`); the offline preview stands in a placeholder",
}


class ReferenceError(Exception):
    """A reference page cannot be generated truthfully (a key without a meaning, a schema shape not handled)."""


# --- JSON Schema -> field table -------------------------------------------------------------------------------------

def _resolve(node: dict, defs: dict) -> tuple[dict, str | None]:
    """The node a `$ref` points at (and the referenced definition's name), else the node itself."""
    ref = node.get("$ref")
    if ref is None:
        return node, None
    name = ref.rsplit("/", 1)[-1]
    return defs[name], name


def _branches(node: dict, defs: dict) -> list[tuple[dict, str | None]]:
    """The non-null alternatives of a node (`anyOf`/`oneOf`), each resolved."""
    alternatives = node.get("anyOf") or node.get("oneOf")
    if alternatives is None or "properties" in node:
        return [_resolve(node, defs)]
    return [_resolve(a, defs) for a in alternatives if a.get("type") != "null"]


def _type(node: dict, defs: dict) -> str:
    parts = []
    for branch, name in _branches(node, defs):
        if "enum" in branch:
            parts.append(" | ".join(f"`{json.dumps(v)}`" for v in branch["enum"]))
        elif "const" in branch:
            parts.append(f"`{json.dumps(branch['const'])}`")
        elif branch.get("type") == "array":
            items, item_name = _resolve(branch.get("items", {}), defs)
            parts.append(f"list of {item_name or _type(items, defs)}")
        elif branch.get("type") == "object" and "properties" not in branch:
            parts.append("mapping")
        elif name is not None:
            parts.append(name)
        elif isinstance(branch.get("type"), list):
            parts.append(" or ".join(branch["type"]))
        else:
            parts.append(str(branch.get("type", "any")))
    return " or ".join(dict.fromkeys(parts)) or "any"


_BOUNDS = (("minimum", ">= {}"), ("exclusiveMinimum", "> {}"), ("maximum", "<= {}"), ("exclusiveMaximum", "< {}"),
           ("minLength", "length >= {}"), ("maxLength", "length <= {}"), ("minItems", ">= {} items"),
           ("maxItems", "<= {} items"), ("minProperties", ">= {} entries"), ("maxProperties", "<= {} entries"),
           ("pattern", "pattern `{}`"), ("format", "format {}"))


def _bounds(node: dict, defs: dict) -> str:
    found = []
    for branch, _ in [(node, None), *_branches(node, defs)]:
        for key, form in _BOUNDS:
            if key in branch:
                text = form.format(branch[key])
                if text not in found:
                    found.append(text)
    return "; ".join(found)


def _text(text: Any) -> str:
    """Text as markdown on one line, for a table cell or a paragraph: outside code spans, `<`, `>`, `&`, `_`, `*`
    and `|` are escaped (help texts write `<stack>`, `__main__.py` and `a|b`); code spans are left as they are
    (Python-Markdown's tables do not split a row at a pipe inside one)."""
    parts = " ".join(str(text).split()).split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = (parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("_", "\\_")
                    .replace("*", "\\*").replace("|", "\\|"))
    return "`".join(parts)


def schema_fields(schema: dict) -> list[dict[str, str]]:
    """Every field of a JSON Schema, depth first: `path` (`a.b`, `a[].b` for list items, `a.<name>.b` for mapping
    values), `type`, `default`, `bounds`, `description`, `required`. A definition already being expanded on the
    path is not expanded again (recursive models)."""
    defs = schema.get("$defs", {})
    rows: list[dict[str, str]] = []

    def walk(node: dict, prefix: str, stack: tuple[str, ...]) -> None:
        for branch, name in _branches(node, defs):
            if name is not None and name in stack:
                continue
            inner = stack + ((name,) if name else ())
            if branch.get("type") == "array" and "items" in branch:
                walk(branch["items"], f"{prefix}[]", inner)
            for key in ("patternProperties",):
                for value in branch.get(key, {}).values():
                    walk(value, f"{prefix}.<name>", inner)
            extra = branch.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                walk(extra, f"{prefix}.<name>", inner)
            required = set(branch.get("required", []))
            for field, prop in branch.get("properties", {}).items():
                path = f"{prefix}.{field}" if prefix else field
                description = prop.get("description") or _resolve(prop, defs)[0].get("description", "")
                rows.append({"path": path, "type": _type(prop, defs),
                             "default": "" if "default" not in prop else f"`{json.dumps(prop['default'])}`",
                             "bounds": _bounds(prop, defs), "description": description,
                             "required": "yes" if field in required else ""})
                walk(prop, path, inner)

    walk(schema, "", ())
    return rows


def fields_table(schema: dict, *, section_depth: int = 2) -> str:
    """The fields of `schema` as one table per top-level field (an `##` heading each, for the page's contents)."""
    rows = schema_fields(schema)
    if not rows:
        raise ReferenceError(f"schema {schema.get('title')!r} has no fields")
    out: list[str] = []
    top = None
    for row in rows:
        head = row["path"].split(".", 1)[0].split("[", 1)[0]
        if head != top:
            top = head
            out += ["", f"{'#' * section_depth} `{head}`", "",
                    "| field | type | required | default | bounds | description |", "|---|---|---|---|---|---|"]
        out.append(f"| `{row['path']}` | {_text(row['type'])} | {row['required']} | {_text(row['default'])} | "
                   f"{_text(row['bounds'])} | {_text(row['description'])} |")
    return "\n".join(out) + "\n"


def cross_field_rules(schema: dict) -> str:
    """The rules the schema cannot state (`x-cross-field-rules`), as a table of id and rule."""
    rules = schema.get("x-cross-field-rules") or {}
    lines = ["| rule id | rule |", "|---|---|"]
    lines += [f"| `{rule}` | {_text(text)} |" for rule, text in rules.items()]
    return "\n".join(lines) + "\n"


# --- the pages' parts -----------------------------------------------------------------------------------------------

def requirements() -> str:
    from blueprints.requirements.service import requirements_json_schema

    schema = requirements_json_schema()
    return (fields_table(schema) + "\n## Rules across fields\n\nChecked where the file is read; every error enforcing "
            "one carries its id.\n\n" + cross_field_rules(schema))


def platform_yaml() -> str:
    from blueprints.requirements.platform_file import platform_json_schema

    schema = platform_json_schema()
    text = fields_table(schema)
    if schema.get("x-cross-field-rules"):
        text += "\n## Rules across fields\n\n" + cross_field_rules(schema)
    return text


def stack_config_keys() -> str:
    from blueprints.contracts.stackconfig import PROJECT, PROJECT_KEYS, REGION_KEY

    keys = {f"{PROJECT}:{k}" for k in PROJECT_KEYS} | {REGION_KEY}
    missing = sorted(keys - set(CONFIG_KEY_MEANINGS))
    stale = sorted(set(CONFIG_KEY_MEANINGS) - keys)
    if missing or stale:
        raise ReferenceError(f"tools/docs/reference.py CONFIG_KEY_MEANINGS: give a meaning for {missing} and drop "
                             f"{stale} (stackconfig.PROJECT_KEYS is the code's list)")
    lines = ["| key | meaning |", "|---|---|"]
    lines += [f"| `{key}` | {_text(CONFIG_KEY_MEANINGS[key])} |" for key in sorted(keys)]
    return "\n".join(lines) + "\n"


def _model_fields(model) -> str:
    return fields_table(model.model_json_schema(), section_depth=3)


def blueprint() -> str:
    from blueprints.contracts.blueprint import Blueprint

    return _model_fields(Blueprint)


def platform_config() -> str:
    from blueprints.contracts.platform import PlatformConfig

    return _model_fields(PlatformConfig)


def plan_record() -> str:
    from blueprints.contracts.stackconfig import PlanRecord

    return _model_fields(PlanRecord)


def cli_commands() -> Iterator[tuple[str, Any]]:
    """(name, click command) of every `blueprint` command, in the order `blueprint --help` lists them."""
    import typer

    from blueprints.cli import app

    group = typer.main.get_command(app)
    ctx = group.make_context("blueprint", ["--help"], resilient_parsing=True)
    for name in group.list_commands(ctx):
        yield name, group.get_command(ctx, name)


def _param_row(param, ctx) -> str:
    """One table row, as `blueprint <command> --help` shows the parameter: its flags (or name) with the value it
    takes, whether it is an argument or an option, and its help with default, range and `[required]`."""
    flags, help_text = param.get_help_record(ctx) or (param.name, "")
    return f"| `{flags}` | {param.param_type_name} | {_text(help_text or '')} |"


def cli() -> str:
    """Every command of `blueprint`: its usage and help, then a row per argument and option (`--help` included)."""
    from blueprints.cli import app
    import typer

    group = typer.main.get_command(app)
    ctx = group.make_context("blueprint", ["--help"], resilient_parsing=True)
    out = ["## `blueprint`", "", "```text", (group.help or "").replace("\b\n", "").strip(), "```", "",
           "| option | kind | help |", "|---|---|---|"]
    out += [_param_row(p, ctx) for p in group.get_params(ctx) if not p.hidden]
    for name, command in cli_commands():
        sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
        usage = " ".join(["blueprint", name, *command.collect_usage_pieces(sub)])
        out += ["", f"## `blueprint {name}`", "", "```text", usage, "```", "",
                _text((command.help or "").replace("\b", "")), "",
                "| argument / option | kind | help |", "|---|---|---|"]
        out += [_param_row(p, sub) for p in command.get_params(sub) if not p.hidden]
    return "\n".join(out) + "\n"


def signals() -> str:
    """The table of every scaling signal and alert (`blueprints.catalog.signals.SIGNALS`)."""
    from blueprints.catalog.signals import signals_markdown

    return signals_markdown() + "\n"


def policies() -> str:
    from policies.rules import RULES

    configs = {path.stem: json.loads(path.read_text()) for path in sorted((ROOT / "policies" / "config").glob("*.json"))}
    envs = sorted(configs, key=lambda e: ("dev", "staging", "prod").index(e) if e in ("dev", "staging", "prod") else 9)
    out = ["| policy | kind | default level | " + " | ".join(f"`{e}.json`" for e in envs) + " | what it checks | config "
           "keys (default) |", "|---|---|---|" + "---|" * len(envs) + "---|---|"]
    for rule in RULES:
        levels = [configs[e].get(rule.name, {}).get("enforcementLevel", rule.enforcement_level.value) for e in envs]
        keys = "; ".join(f"`{k}` ({json.dumps(s.get('default'))}): {s.get('description', '')}"
                         for k, s in rule.config.items())
        kind = "stack" if rule.stack_check is not None else "resource"
        out.append(f"| `{rule.name}` | {kind} | {rule.enforcement_level.value} | " + " | ".join(levels) +
                   f" | {_text(rule.description)} | {_text(keys)} |")
    return "\n".join(out) + "\n"


#: Marker name -> generator.
GENERATORS: dict[str, Callable[[], str]] = {
    "requirements": requirements,
    "platform-yaml": platform_yaml,
    "stack-config-keys": stack_config_keys,
    "blueprint": blueprint,
    "platform-config": platform_config,
    "plan-record": plan_record,
    "cli": cli,
    "policies": policies,
    "signals": signals,
}
