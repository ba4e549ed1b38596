"""Argument validation: the schema DSL against ``jsonschema``'s reused ``Draft202012Validator``.

Workload: a realistic 8-property spec (a deploy tool: strings, an enum, an integer, a number, a
boolean, a nested object and an array of strings), validated on a valid snapshotted argument
value. Measured, each in nanoseconds per call (the median of several rounds of batches):

- ``spec_precompiled``: the validator ``define_tool`` compiles once at definition time;
- ``validate_args``: the public function, which compiles the spec on every call;
- ``attrs_validate_and_structure``: the attrs-class form, validation plus structuring into an
  instance (what a typed body's arguments cost);
- ``jsonschema``: ``Draft202012Validator(schema).is_valid(value)`` with the validator built once,
  on the same schema (``schema_spec_to_json_schema``) and the same value as plain data.

Target: the spec form (``spec_precompiled``) is at least 3x faster than ``jsonschema``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

import attrs
from jsonschema import Draft202012Validator

from dsh_tools import (
    SchemaSpec,
    schema_spec_to_json_schema,
    snapshot_json,
    thaw_json,
    validate_args,
)
from dsh_tools._values._attrs_schema import derive_attrs_schema
from dsh_tools._values._converter import converter
from dsh_tools._values._schema import compile_spec

TARGET_SPEEDUP = 3.0

SPEC: SchemaSpec = {
    "service": {"type": "string", "required": True, "description": "The service to deploy."},
    "version": {"type": "string", "required": True},
    "strategy": {"type": "string", "enum": ["rolling", "blue-green", "canary"]},
    "replicas": {"type": "integer", "required": True},
    "canary_fraction": {"type": "number"},
    "dry_run": {"type": "boolean"},
    "target": {
        "type": "object",
        "required": True,
        "properties": {
            "cluster": {"type": "string", "required": True},
            "namespace": {"type": "string"},
            "port": {"type": "integer"},
        },
    },
    "labels": {"type": "array", "items": {"type": "string"}},
}


@attrs.frozen(kw_only=True)
class Target:
    cluster: str
    namespace: str = "default"
    port: int | None = None


@attrs.frozen(kw_only=True)
class DeployArgs:
    service: str = attrs.field(metadata={"description": "The service to deploy."})
    version: str
    strategy: Literal["rolling", "blue-green", "canary"] = "rolling"
    replicas: int
    canary_fraction: float | None = None
    dry_run: bool = False
    target: Target
    labels: tuple[str, ...] = ()


ARGUMENTS: dict[str, Any] = {
    "service": "billing-api",
    "version": "2026.11.3",
    "strategy": "canary",
    "replicas": 6,
    "canary_fraction": 0.15,
    "dry_run": False,
    "target": {"cluster": "eu-west-1", "namespace": "payments", "port": 8443},
    "labels": ["team:payments", "tier:critical", "owner:alice"],
}


def _median_ns_per_call(fn: Callable[[], object], calls: int, rounds: int) -> float:
    samples: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter_ns() - started) / calls)
    return statistics.median(samples)


def run(quick: bool) -> dict[str, object]:
    calls, rounds = (2_000, 5) if quick else (20_000, 9)
    frozen = snapshot_json(ARGUMENTS)
    plain = thaw_json(frozen)

    precompiled = compile_spec(SPEC)
    derived = derive_attrs_schema(DeployArgs)
    class_validator = compile_spec(derived.spec)
    oracle = Draft202012Validator(schema_spec_to_json_schema(SPEC))

    # Every contender must agree that the value is valid, or the timings compare nothing.
    assert precompiled(frozen) == []
    assert validate_args(SPEC, frozen) == []
    assert oracle.is_valid(plain)  # pyright: ignore[reportUnknownMemberType]

    def validate_and_structure() -> DeployArgs:
        assert not class_validator(frozen)
        return converter.structure(derived.shape(frozen), DeployArgs)  # pyright: ignore[reportArgumentType]

    assert isinstance(validate_and_structure(), DeployArgs)

    spec_ns = _median_ns_per_call(lambda: precompiled(frozen), calls, rounds)
    public_ns = _median_ns_per_call(lambda: validate_args(SPEC, frozen), calls, rounds)
    attrs_ns = _median_ns_per_call(validate_and_structure, calls, rounds)
    jsonschema_ns = _median_ns_per_call(
        lambda: oracle.is_valid(plain),  # pyright: ignore[reportUnknownMemberType]
        calls,
        rounds,
    )
    speedup = jsonschema_ns / spec_ns
    return {
        "ns_per_call": {
            "spec_precompiled": round(spec_ns),
            "validate_args": round(public_ns),
            "attrs_validate_and_structure": round(attrs_ns),
            "jsonschema": round(jsonschema_ns),
        },
        "speedup_vs_jsonschema": {
            "spec_precompiled": round(speedup, 2),
            "validate_args": round(jsonschema_ns / public_ns, 2),
            "attrs_validate_and_structure": round(jsonschema_ns / attrs_ns, 2),
        },
        "target": f"spec form >= {TARGET_SPEEDUP}x faster than jsonschema",
        "target_met": speedup >= TARGET_SPEEDUP,
    }
