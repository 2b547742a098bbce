"""Helpers of the lake-table tests: rows compared order-free, random predicates given
both as SQL text (pqindex) and as the same pyarrow expression (the reference)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def normalize(t: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``t``, columns by name, strings as ``string``, sorted by ``id``."""
    t = t.select(sorted(t.column_names))
    t = t.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(f.type)
                          or pa.types.is_string_view(f.type) else f for f in t.schema]))
    return sorted(t.to_pylist(), key=lambda r: (r["id"], repr(r)))


def _leaf(rng: random.Random, max_id: int, users: int) -> tuple[str, pc.Expression]:
    kind = rng.choice(["id", "user", "amount", "region", "day", "null"])
    if kind == "id":
        v = rng.randrange(-10, max_id)
        op = rng.choice(["<", "<=", "=", ">=", ">", "!="])
        f = pc.field("id")
        ops = {"<": f < v, "<=": f <= v, "=": f == v, ">=": f >= v, ">": f > v, "!=": f != v}
        return f"id {op} {v}", ops[op]
    if kind == "user":
        vs = [f"u{rng.randrange(users):04d}" for _ in range(rng.randrange(1, 4))]
        return "user IN (" + ", ".join(f"'{v}'" for v in vs) + ")", pc.field("user").isin(vs)
    if kind == "amount":
        v = round(rng.uniform(-60, 60), 2)
        if rng.random() < 0.5:
            return f"amount > {v}", pc.field("amount") > v
        return f"amount < {v}", pc.field("amount") < v
    if kind == "region":
        v = rng.choice(["eu", "us", "ap", "xx"])
        return f"region = '{v}'", pc.field("region") == v
    if kind == "day":
        d = dt.date(2024, 1, rng.randrange(1, 8))
        if rng.random() < 0.5:
            return f"day <= DATE '{d}'", pc.field("day") <= pa.scalar(d)
        return f"day = DATE '{d}'", pc.field("day") == pa.scalar(d)
    if rng.random() < 0.5:
        return "amount IS NULL", pc.field("amount").is_null()
    return "amount IS NOT NULL", pc.field("amount").is_valid()


def random_predicate(rng: random.Random, max_id: int, users: int
                     ) -> tuple[str, pc.Expression]:
    """One to three leaves on id, user, amount, region, day, joined by AND / OR."""
    sql, expr = _leaf(rng, max_id, users)
    for _ in range(rng.randrange(0, 3)):
        s2, e2 = _leaf(rng, max_id, users)
        if rng.random() < 0.5:
            sql, expr = f"({sql}) AND ({s2})", expr & e2
        else:
            sql, expr = f"({sql}) OR ({s2})", expr | e2
    return sql, expr
