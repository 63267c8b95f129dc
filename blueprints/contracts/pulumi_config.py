"""A stack settings file's `config:` map as the Pulumi CLI reads it, and what the engine hands the program.

Facts, recorded with their sources and tests in `blueprints/catalog/pulumi_config.yaml` (pulumi/pulumi at
v3.259.0-14-g1b5949891b; the Python SDK in uv.lock is 3.272):
- A key is `<namespace>:<name>`, or the old form `<namespace>:config:<name>` read as `<namespace>:<name>`; any other
  key with a colon makes the CLI refuse the file (`sdk/go/common/resource/config/key.go` `ParseKey`).
- A key without a colon is in the project's namespace: `blueprint` is read as `<project>:blueprint`, the project
  being `Pulumi.yaml`'s `name:` (`sdk/go/common/workspace/loaders.go` `stackConfigNamespacedWithProject`, called by
  `LoadProjectStackBytes`; https://www.pulumi.com/docs/iac/concepts/config/ "Configuration Keys": "In cases where a
  simple name without a colon is used, Pulumi automatically uses the current project name ... as the namespace"). That
  rewrite fills a Go map while ranging over another (random order): a key spelled both ways keeps one value at random.
- A mapping with the single key `secure` holding a string is a secret (ciphertext); an object or list that contains
  one is a secret as a whole (`sdk/go/common/resource/config/object.go` `isSecureValue`, `object.Secure`).
- The engine passes the program a string per key: a string as it is, a bool or number as its JSON text, an object
  or list as JSON (`object.go` `MarshalString`); the SDK's `pulumi.Config(ns).get(name)` reads `<ns>:<name>`.
- YAML is read with gopkg.in/yaml.v3 (`sdk/go/common/encoding/marshal.go`): a key repeated in one mapping is an error
  (so is it for `blueprints.core.yamlio.load_yaml`), and a timestamp-like plain scalar stays a string (PyYAML makes
  it a date: refused here, so both read the same).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Mapping

from blueprints.core.errors import StackConfigError

#: The form `pulumi config set` writes and the CLI reads: `<namespace>:<name>`.
KEY_FORM = "<namespace>:<name>"


@dataclass(frozen=True)
class ConfigEntry:
    """One config value as the CLI reads it: `key` (`<namespace>:<name>`), the key as the file spells it, the YAML
    value, and whether it is (or contains) a `secure:` value."""

    key: str
    spelled: str
    value: Any
    secret: bool

    @property
    def namespace(self) -> str:
        return self.key.split(":", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(":", 1)[1]


def cli_key(spelled: str, *, project: str) -> str:
    """The key the Pulumi CLI reads for a key as spelled in a stack file (`ParseKey` after the project-namespace
    default). Raises `ValueError` with the CLI's own complaint for a key it refuses."""
    colons = spelled.count(":")
    if colons == 0:
        return f"{project}:{spelled}"
    if colons == 1:
        return spelled
    parts = spelled.split(":")
    if colons == 2 and parts[1] == "config":
        return f"{parts[0]}:{parts[2]}"
    raise ValueError(f"could not parse {spelled} as a configuration key (configuration keys should be of the form "
                     f"`{KEY_FORM}`)")


def is_secure_value(value: Any) -> bool:
    """A `{secure: <ciphertext>}` value (exactly that one key, a string)."""
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def contains_secure(value: Any) -> bool:
    """The value is a secure value or an object or list holding one at any depth (`object.Secure`)."""
    if is_secure_value(value):
        return True
    if isinstance(value, dict):
        return any(contains_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secure(v) for v in value)
    return False


def _timestamp(value: Any) -> str | None:
    """Where PyYAML read a date or time the CLI reads as text: the path below the value, else None."""
    if isinstance(value, (dt.date, dt.datetime)):
        return ""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        below = _timestamp(v)
        if below is not None:
            return f".{k}{below}" if isinstance(k, str) else f"[{k}]{below}"
    return None


def cli_config(config: Mapping[Any, Any], *, project: str, source: str) -> dict[str, ConfigEntry]:
    """The config map as the Pulumi CLI reads it: key (`<namespace>:<name>`) -> entry, in file order.

    Args:
        config: the stack file's `config:` mapping, as YAML gives it.
        project: the project's name (`Pulumi.yaml` `name:`), the namespace of a bare key.
        source: what messages name (the stack config's path).

    Raises:
        StackConfigError: a key that is not text, one the CLI refuses, two spellings of one key (the CLI keeps one
            of them at random), or a value PyYAML reads as a date where the CLI reads text; the message names the
            key as spelled, what the CLI reads and the fix.
    """
    found: dict[str, ConfigEntry] = {}
    problems = []
    for spelled, value in config.items():
        if not isinstance(spelled, str):
            problems.append(f"config key {spelled!r} is not text; write it as `{project}:<name>` (quoted if needed)")
            continue
        try:
            key = cli_key(spelled, project=project)
        except ValueError as exc:
            problems.append(f"{exc}: `pulumi up` refuses this file; fix or remove {spelled}")
            continue
        where = _timestamp(value)
        if where is not None:
            problems.append(f"{spelled}{where} is a date or time to this reader but text to the Pulumi CLI (YAML "
                            "1.2); quote it so both read the same")
        if key in found:
            bare = ":" not in found[key].spelled or ":" not in spelled
            why = (f"a key without a namespace is in the project's, {project}" if bare else
                   "`<namespace>:config:<name>` is the old spelling of `<namespace>:<name>`")
            problems.append(f"{found[key].spelled} and {spelled} are both {key} to the Pulumi CLI ({why}), "
                            "which reads one of the two values at random (its namespacing fills a Go map): the review "
                            f"cannot show what `pulumi up` reads; keep only {key}")
            continue
        found[key] = ConfigEntry(key=key, spelled=spelled, value=value, secret=contains_secure(value))
    if problems:
        raise StackConfigError(f"{source}: " + "; ".join(problems))
    return found


def engine_value(entry: ConfigEntry) -> str:
    """The string the engine passes the program for a (non-secret) value: text as it is, no value as "", anything else
    as compact JSON (Go's `encoding/json`: sorted keys, no spaces, integral floats without a fraction)."""
    if isinstance(entry.value, str):
        return entry.value
    if entry.value is None:
        return ""  # `key:` with no value reads as "" (sdk/go/common/workspace/loaders_test.go TestEmptyValueWarning)
    return json.dumps(_go_numbers(entry.value), sort_keys=True, separators=(",", ":"))


def _go_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)  # Go's encoding/json writes float64 600000.0 as 600000
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def project_config_problems(project: Any, *, source: str) -> list[str]:
    """Values the project file (`Pulumi.yaml`) gives every stack's config: a `config:` entry with `value:` or
    `default:`, or a shorthand scalar or list (read as one), which `pulumi up` applies where a stack config sets no
    value and the review of a stack config cannot see (`sdk/go/common/workspace/project.go`
    `RewriteShorthandConfigValues`, `Project.Validate`). A type-only declaration gives none. Each with the fix."""
    config = project.get("config") if isinstance(project, dict) else None
    if config is None:
        return []
    if not isinstance(config, dict):
        return [f"{source}: `config:` must be a mapping of key declarations"]
    return [f"{source}: config.{key} gives every stack a value that `pulumi up` applies and no stack config shows; "
            "remove it (stack configs hold every setting they apply: set it per stack with `pulumi config set`)"
            for key, declared in config.items()
            if not isinstance(declared, dict) or "value" in declared or "default" in declared]
