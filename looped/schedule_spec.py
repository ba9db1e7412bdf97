"""One spec string per depth schedule (CLI, YAML configs, notebooks), and serving-depth lists.

    spec       := fixed | uniform | fixedfirst | lognormal | curriculum
    fixed      := "fixed:" INT
    uniform    := "uniform:" INT "-" INT
    fixedfirst := "fixed-first:k=" INT ",frac=" FLOAT ",then=" spec   (then= last, not fixed-first)
    lognormal  := "lognormal-poisson:mean=" FLOAT ",sigma=" FLOAT ",max=" INT
    curriculum := "curriculum:start=" INT ",end=" INT ",frac=" FLOAT

Keys other than ``then=`` may come in any order; every key is required. ``str(schedule)`` writes
the canonical spec, and ``parse_schedule(str(s), s.seed) == s``.
"""

from __future__ import annotations

import operator
import re
from dataclasses import fields, replace
from typing import Any

from looped.errors import UserError
from looped.schedules import Fixed, FixedFirst, Schedule, Uniform
from looped.schedules_more import Curriculum, LogNormalPoisson

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_RANGE = re.compile(r"(\d+)-(\d+)")
# each kind's keys, their order and types are its class's fields (all but `seed`)
CLASSES = {c.kind: c for c in (Fixed, Uniform, FixedFirst, LogNormalPoisson, Curriculum)}
KINDS = tuple(CLASSES)
_EXAMPLES = {
    "fixed": "fixed:4",
    "uniform": "uniform:1-16",
    "fixed-first": "fixed-first:k=4,frac=0.8,then=uniform:1-16",
    "lognormal-poisson": "lognormal-poisson:mean=8,sigma=0.5,max=16",
    "curriculum": "curriculum:start=1,end=16,frac=0.5",
}


def parse_schedule(spec: str, seed: int = 0) -> Schedule:
    """Parse a schedule spec (grammar in the module docstring); UserError names the bad part."""
    if isinstance(spec, Schedule):
        return replace(spec, seed=seed)
    spec = str(spec).strip()
    try:
        return _parse(spec, operator.index(seed))
    except UserError as err:
        raise UserError(f"bad depth schedule {spec!r}: {err}") from None


def _parse(spec: str, seed: int) -> Schedule:
    kind, sep, body = spec.partition(":")
    kind, body = kind.strip(), body.strip()
    if kind not in KINDS:
        raise UserError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)} (e.g. fixed:4)")
    if not sep or not body:
        raise UserError(f"{kind} needs arguments, e.g. {_EXAMPLES[kind]}")
    if kind == "fixed":
        return Fixed(_number("K", body, kind, "int"), seed=seed)
    if kind == "uniform":
        m = _RANGE.fullmatch(body)
        if not m:
            raise UserError(
                f"{body!r} is not a range LO-HI of positive integers, e.g. uniform:1-16"
            )
        return Uniform(int(m.group(1)), int(m.group(2)), seed=seed)
    types = {f.name: f.type for f in fields(CLASSES[kind]) if f.name != "seed"}
    args: dict[str, Any] = _key_values(kind, body, tuple(types))
    for key, text in args.items():
        if key != "then":
            args[key] = _number(key, text, kind, types[key])
            continue
        try:  # FixedFirst itself refuses a fixed-first `then`
            args[key] = _parse(text, seed)
        except UserError as err:
            raise UserError(f"then={text}: {err}") from None
    return CLASSES[kind](**args, seed=seed)


def _key_values(kind: str, body: str, keys: tuple[str, ...]) -> dict[str, str]:
    """Split `a=1,b=2,then=SPEC` into a dict; `then=` swallows the rest, commas included."""
    out = {}
    parts = body.split(",")
    for i, part in enumerate(parts):
        key, eq, value = part.partition("=")
        key = key.strip()
        if key == "then" and eq:
            value = ",".join([value, *parts[i + 1 :]])
        if not eq or not key:
            raise UserError(f"{part.strip()!r} is not key=value; write {_EXAMPLES[kind]}")
        if key not in keys:
            raise UserError(f"unknown key {key!r} for {kind}; its keys are {', '.join(keys)}")
        if key in out:
            raise UserError(f"key {key!r} given twice")
        out[key] = value.strip()
        if key == "then":
            break
    missing = [k for k in keys if k not in out]
    if missing:
        hint = " (then= must be the last key)" if "then" in out else ""
        raise UserError(f"missing key {missing[0]!r}{hint}; write {_EXAMPLES[kind]}")
    return out


def _number(key: str, text: str, kind: str, type_name: str) -> Any:
    """`text` as the field's type, "int" or "float" (its annotation)."""
    if not (_INT if type_name == "int" else _FLOAT).fullmatch(text.strip()):
        noun = "an integer" if type_name == "int" else "a number"
        raise UserError(f"{key}={text!r} is not {noun}; write {_EXAMPLES[kind]}")
    return int(text) if type_name == "int" else float(text)


def parse_depths(spec: str) -> list[int]:
    """Serving depths, ascending: "1-16", "1,2,4,8", "4", "1-4,8"; no depth twice."""
    text = str(spec).strip()
    if not text:
        raise UserError("empty depth list; write e.g. 1-16 or 1,2,4,8")
    depths: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = _RANGE.fullmatch(part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise UserError(f"depth range {part!r} has lo > hi; write LO-HI with LO <= HI")
            items = list(range(lo, hi + 1))
        elif _INT.fullmatch(part):
            items = [int(part)]
        else:
            raise UserError(f"depth {part!r} in {text!r} is not an integer or LO-HI range")
        for k in items:
            if k < 1:
                raise UserError(f"depth {part!r} in {text!r} is below 1; loop counts start at 1")
            if k in depths:
                raise UserError(f"depth {k} is listed twice in {text!r}")
            depths.append(k)
    return sorted(depths)
