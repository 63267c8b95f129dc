"""The building blocks of the requirements schema: the closed `Section` every section derives from, the field
patterns with their sources (DNS names, regions, weights URIs, digests, ARNs, tag values), catalog-checked names
(`Region`, `ModelId`, `InstanceTypeName`), distinct-item lists, and the JSON Schema vocabulary (`given`, `when`,
`is_const`, `absent_or_null`) in which a section states its cross-field rules beside the validator enforcing them.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Iterable

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from blueprints.catalog import known_region, load_catalog
from blueprints.core.errors import CatalogError, describe_pattern
from blueprints.core.jsontypes import check_json_types



DNS_1123_LABEL = describe_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "a DNS-1123 label: lowercase letters, digits "
                                  "and `-`, starting and ending with a letter or digit")


#: AWS region names such as `us-east-1`, `eu-central-1`, `ap-southeast-2`.
AWS_REGION = describe_pattern(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", "an AWS region name such as us-east-1")


class CatalogNames:
    """Annotation metadata: the JSON Schema of a field lists the names a catalog knows (`enum`), read when the schema
    is generated, not at import. Pair it with an `AfterValidator` that checks the same names.

    Example: `Annotated[str, AfterValidator(known_model_id), CatalogNames(lambda: load_catalog().models)]`.
    """

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self.names = names

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        schema = handler(core_schema)
        schema["enum"] = sorted(self.names())
        return schema


def _unique(value: list) -> list:
    if len(set(value)) != len(value):
        repeated = sorted({str(v) for v in value if value.count(v) > 1})
        raise ValueError(f"lists {', '.join(repeated)} more than once; give each once")
    return value


class _UniqueItems:
    """Annotation metadata: the JSON Schema says `uniqueItems`, as `_unique` checks."""

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        schema = handler(core_schema)
        schema["uniqueItems"] = True
        return schema


#: Annotation metadata for a list whose items are distinct: the loader checks it (`UNIQUE`), the schema states it
#: (`UNIQUE_ITEMS`). Example: `Annotated[list[Region], UNIQUE, UNIQUE_ITEMS]`.
UNIQUE = AfterValidator(_unique)


UNIQUE_ITEMS = _UniqueItems()


#: An AWS region in the catalog (`blueprints.catalog.known_region`).
Region = Annotated[str, Field(pattern=AWS_REGION), AfterValidator(known_region),
                   CatalogNames(lambda: load_catalog().aws_regions)]


def _catalog_lookup(lookup: Callable[[str], object]) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            lookup(value)
        except CatalogError as exc:
            raise ValueError(str(exc)) from None
        return value
    return check


#: A model id of the catalog (blueprints/catalog/models.yaml).
ModelId = Annotated[str, AfterValidator(_catalog_lookup(lambda v: load_catalog().model(v))),
                    CatalogNames(lambda: load_catalog().models)]


#: An EC2 or SageMaker instance type of the catalog (blueprints/catalog/instances.yaml).
InstanceTypeName = Annotated[str, AfterValidator(_catalog_lookup(lambda v: load_catalog().instance(v))),
                             CatalogNames(lambda: [*load_catalog().ec2, *load_catalog().sagemaker])]


#: A Hugging Face repository id, `namespace/name`: letters, digits and `_`, joined by single `-` or `.` (no `--`, no
#: `..`, never starting or ending with either); huggingface_hub `validate_repo_id` (utils/_validators.py) allows at
#: most 96 characters for the name.
HF_REPO = r"[A-Za-z0-9_]+([.-][A-Za-z0-9_]+)*/[A-Za-z0-9_]+([.-][A-Za-z0-9_]+)*"


#: One segment of an S3 key prefix: S3's safe characters (0-9 a-z A-Z ! - _ . * ' ( ); Amazon S3 user guide, "Object key
#: naming guidelines"), not starting with `.` (no `.` or `..` segments; with `/`-joined segments, no `//`).
S3_SEGMENT = r"[A-Za-z0-9!_'()*-][A-Za-z0-9!_.'()*-]*"


#: One segment of an https URL path: RFC 3986 path characters, not starting with `.` (no `.` or `..` segment).
URL_SEGMENT = r"[A-Za-z0-9_~%!$&'()*+,;=:@-][A-Za-z0-9_.~%!$&'()*+,;=:@-]*"


#: Where weights come from: `s3://bucket/prefix/` (a bucket name: 3-63 lowercase letters, digits, `.` and `-`),
#: `hf://org/name`, or (edge clusters) an `https://` URL of one file.
WEIGHTS_URI = describe_pattern(
    rf"^(s3://[a-z0-9][a-z0-9.\-]{{1,61}}[a-z0-9]/({S3_SEGMENT}(/{S3_SEGMENT})*/?)?|hf://{HF_REPO}"
    rf"|https://[a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?(:[0-9]{{1,5}})?(/{URL_SEGMENT})+)$",
    "`s3://bucket/prefix/` (S3's safe characters; no empty, `.` or `..` segment), `hf://org/name` (letters, "
    "digits, `_`, and single `-` or `.` between them) or an `https://host/path` URL of one file (no `.` or `..` "
    "segment)")


#: Longest weights URI: an S3 key is at most 1,024 bytes (S3 user guide, "Naming Amazon S3 objects").
MAX_WEIGHTS_URI_CHARS = 1100


#: A SHA-256 digest, lowercase hex.
SHA256_HEX = describe_pattern(r"^[0-9a-f]{64}$", "a SHA-256 digest: 64 lowercase hex digits")


#: A Kubernetes object name (DNS-1123 subdomain): a Secret, an IngressClass.
DNS_1123_SUBDOMAIN = describe_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                                      "a Kubernetes object name: lowercase letters, digits, `-` and `.`")


#: A certificate subject's CN as the role's condition (aws:PrincipalTag/x509Subject/CN) compares it: one line of
#: word characters, dots, @, *, : and -.
CERTIFICATE_CN = describe_pattern(r"^[\w.@*:-]+$", "a certificate CN: one line of letters, digits and . @ * : -")


#: An ACM Private CA ARN: `arn:aws:acm-pca:<region>:<account>:certificate-authority/<id>` (AWS General Reference,
#: "Amazon Resource Names", ACM Private CA resource type `certificate-authority/<id>`).
ACM_PCA_ARN = describe_pattern(
    r"^arn:aws(-cn|-us-gov)?:acm-pca:[a-z]{2}(-gov)?-[a-z]+-[0-9]:[0-9]{12}:certificate-authority/[0-9a-f-]{36}$",
    "an ACM Private CA ARN, arn:aws:acm-pca:<region>:<account>:certificate-authority/<id>")


#: A KMS key ARN (AWS KMS Developer Guide, "Key identifiers": `arn:aws:kms:<region>:<account>:key/<key id>`, the id a
#: UUID or a multi-Region `mrk-` id). IAM grants use of a key only by its key ARN: "You cannot use a key id, alias name,
#: or alias ARN to identify a KMS key in an IAM policy statement" (KMS Developer Guide, cmks-in-iam-policies).
KMS_KEY_ARN = describe_pattern(
    r"^arn:aws(-cn|-us-gov)?:kms:[a-z]{2}(-gov)?-[a-z]+-[0-9]:[0-9]{12}:key/"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$",
    "a KMS key ARN, arn:aws:kms:<region>:<account>:key/<key id> (not an alias)")


#: Tag values: AWS allows up to 256 letters, digits, spaces and `_ . : / = + - @` (AWS General Reference, "Tagging
#: best practices", tag restrictions); `=` is left out because the load balancer's tags travel in one Kubernetes
#: annotation, `key=value` pairs joined by commas (AWS Load Balancer Controller,
#: `service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags`). Starts and ends with a non-space.
TAG_VALUE = describe_pattern(r"^[A-Za-z0-9_.:/+\-@]([A-Za-z0-9_ .:/+\-@]*[A-Za-z0-9_.:/+\-@])?$",
                             "a tag value: letters, digits, spaces and _ . : / + - @ (no `=`, no line breaks), "
                             "not starting or ending with a space")


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        return check_json_types(cls, data)


def absent_or_null(*fields: str) -> dict:
    """JSON Schema: none of `fields` has a value (each absent or null)."""
    return {"properties": {f: {"type": "null"} for f in fields}}


def given(types: dict[str, str]) -> dict:
    """JSON Schema: each field present with a value of the JSON type given."""
    return {"required": list(types), "properties": {f: {"type": t} for f, t in types.items()}}


def when(condition: dict, then: dict) -> dict:
    """JSON Schema: `if` the object matches `condition`, `then` it matches `then`."""
    return {"if": condition, "then": then}


def is_const(field: str, value: object) -> dict:
    """JSON Schema: `field` is present and equals `value`."""
    return {"required": [field], "properties": {field: {"const": value}}}
