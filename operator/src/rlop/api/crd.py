"""Generate the RLJob CustomResourceDefinition from the pydantic models (pure).

pydantic emits JSON Schema 2020-12; the API server wants a structural OpenAPI v3.0 schema. This module
inlines ``$ref``s and rewrites the constructs the API server refuses (see the notes in each helper).
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from rlop.api import reasons as R
from rlop.api.models import (
    GROUP,
    JOB_NAME_PATTERN,
    KIND,
    MAX_JOB_NAME,
    PLURAL,
    SHORT_NAMES,
    VERSION,
    RLJobSpec,
    RLJobStatus,
)
from rlop.api.pools import KINDS

Schema = dict[str, Any]


class _Generator(GenerateJsonSchema):
    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        out = super().literal_schema(schema)
        if "const" in out:  # OpenAPI v3.0 has no const
            out["enum"] = [out.pop("const")]
        return out

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _inline(node: Any, defs: dict[str, Schema]) -> Any:
    """Resolve every $ref and collapse single-element allOf wrappers."""
    if isinstance(node, list):
        return [_inline(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**defs[node["$ref"].split("/")[-1]], **rest}, defs)
    if "allOf" in node and len(node["allOf"]) == 1:
        rest = {k: v for k, v in node.items() if k != "allOf"}
        return _inline({**node["allOf"][0], **rest}, defs)
    return {k: _inline(v, defs) for k, v in node.items()}


def _structural(node: Any) -> Any:
    """Rewrite JSON Schema 2020-12 into what a structural CRD schema allows."""
    if isinstance(node, list):
        return [_structural(x) for x in node]
    if not isinstance(node, dict):
        return node
    node = {k: _structural(v) for k, v in node.items() if k != "title"}
    if "anyOf" in node:  # Optional[X] -> X (absence, not null, means unset); int|str -> int-or-string
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if sorted(b.get("type", "") for b in branches) == ["integer", "string"]:
            node["x-kubernetes-int-or-string"] = True
            node.update({k: v for b in branches for k, v in b.items() if k == "maxLength"})
        else:
            (only,) = branches
            node = {**only, **node}
    if node.get("default", 0) is None:
        node.pop("default")
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        value = node.get(exclusive)
        if isinstance(value, int | float) and not isinstance(value, bool):
            node[bound], node[exclusive] = value, True
    extra = node.pop("additionalProperties", None)
    if extra is True:  # open partial schemas of Kubernetes types keep what they do not declare
        node["x-kubernetes-preserve-unknown-fields"] = True
    elif isinstance(extra, dict) and "properties" not in node:
        node["additionalProperties"] = extra
    if node.get("type") == "object" or "properties" in node:
        node.setdefault("type", "object")
    return node


def openapi_schema(model: type[BaseModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, schema_generator=_Generator, mode="validation")
    defs = raw.pop("$defs", {})
    result: Schema = _structural(_inline(raw, defs))
    return result


def _column(name: str, path: str, type_: str = "string", priority: int = 0) -> Schema:
    col: Schema = {"name": name, "type": type_, "jsonPath": path}
    if priority:
        col["priority"] = priority
    return col


def rljob_crd() -> Schema:
    """The CustomResourceDefinition manifest for RLJob."""
    root: Schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": openapi_schema(RLJobSpec),
            "status": openapi_schema(RLJobStatus),
        },
        "x-kubernetes-validations": [
            {
                "rule": f"size(self.metadata.name) <= {MAX_JOB_NAME}",
                "message": f"metadata.name must be at most {MAX_JOB_NAME} characters "
                "(child objects append the pool name)",
            },
            {
                "rule": f"self.metadata.name.matches('{JOB_NAME_PATTERN}')",
                "message": "metadata.name must be a DNS label that starts with a letter (no dots): "
                "it names the job's Services and StatefulSet",
            },
        ],
    }
    columns = [_column("Phase", ".status.phase")]
    columns += [_column(k.name.capitalize(), f".status.pools.{k.name}.replicas") for k in KINDS if k.column]
    columns += [
        _column("Restarts", ".status.trainer.restarts", "integer"),
        _column("Age", ".metadata.creationTimestamp", "date"),
        _column("Reason", f'.status.conditions[?(@.type=="{R.READY}")].message', priority=1),
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": SHORT_NAMES,
                "categories": ["rlop"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def rljob_crd_yaml() -> str:
    header = "# Generated by `rlop crd` from operator/src/rlop/api/models.py. DO NOT EDIT.\n"
    return header + yaml.safe_dump(rljob_crd(), sort_keys=False, width=120)
