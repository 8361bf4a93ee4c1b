"""Spark's pushed filters on topic, partition, offset and timestamp, as bounds.

``pushFilters`` hands over a list of filters that are ANDed.  Those this
module understands become :class:`Bounds`: topic/partition sets choose
folders, offset bounds become index lookups, a timestamp floor skips segments
whose newest record is older, and both timestamp bounds are also applied to
rows in the tasks (timestamps are not ordered within a partition, so they
prune files only from below).  Everything accepted is applied exactly, so no
accepted filter has to be re-evaluated by Spark.

pyspark 4.3.0 caches a reader's pushed state with the DataFrame: a later
query on the *same* DataFrame (say, unfiltered) reuses the filtered plan and
returns too few rows.  That cannot be undone from Python, so the source only
accepts filters when the user opts in with ``.option("pushFilters", "true")``.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, List, Optional, Set, Tuple

if TYPE_CHECKING:
    from pyspark.sql.datasource import Filter

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


@dataclass
class Bounds:
    """The AND of accepted filters.  ``None`` means unbounded; ts in epoch ms, [lo, hi)."""

    topics: Optional[Set[str]] = None
    partitions: Optional[Set[int]] = None
    offset_lo: Optional[int] = None     # inclusive
    offset_hi: Optional[int] = None     # exclusive
    ts_lo: Optional[int] = None         # inclusive, ms
    ts_hi: Optional[int] = None         # exclusive, ms

    def is_empty(self) -> bool:
        return self == Bounds()

    def at_least(self, name: str, v: int) -> None:
        """Raise lower bound ``name`` (``offset_lo``/``ts_lo``) to ``v`` (an AND keeps the larger)."""
        cur = getattr(self, name)
        setattr(self, name, v if cur is None else max(cur, v))

    def below(self, name: str, v: int) -> None:
        """Lower exclusive upper bound ``name`` (``offset_hi``/``ts_hi``) to ``v``."""
        cur = getattr(self, name)
        setattr(self, name, v if cur is None else min(cur, v))

    def allows(self, topic: str, partition: int) -> bool:
        return ((self.topics is None or topic in self.topics)
                and (self.partitions is None or partition in self.partitions))


def _micros(value: object) -> Optional[int]:
    """A pushed timestamp literal as epoch microseconds."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()   # Spark hands naive datetimes in the session-local zone
        delta = value - _EPOCH
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _floor_ms(us: int) -> int:
    return us // 1000


def _ceil_ms(us: int) -> int:
    return -((-us) // 1000)


def push(filters: Iterable[Filter], bounds: Bounds) -> List[Filter]:
    """Fold the filters this source understands into ``bounds``; return the others."""
    # pyspark only when filters are pushed: this module (Bounds) is used without it
    from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In,
                                        LessThan, LessThanOrEqual)
    rest: List[Filter] = []
    for f in filters:
        attr = getattr(f, "attribute", None)
        col = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
        value = getattr(f, "value", None)
        ok = False
        if col == "topic" and isinstance(f, (EqualTo, In)):
            vals = {f.value} if isinstance(f, EqualTo) else set(f.value)
            if all(isinstance(v, str) for v in vals):
                bounds.topics = vals if bounds.topics is None else bounds.topics & vals
                ok = True
        elif col == "partition" and isinstance(f, (EqualTo, In)):
            vals = {f.value} if isinstance(f, EqualTo) else set(f.value)
            if all(isinstance(v, int) for v in vals):
                bounds.partitions = vals if bounds.partitions is None else bounds.partitions & vals
                ok = True
        elif col == "offset" and isinstance(value, int):
            v = value
            ok = True
            if isinstance(f, EqualTo):
                bounds.at_least("offset_lo", v)
                bounds.below("offset_hi", v + 1)
            elif isinstance(f, GreaterThan):
                bounds.at_least("offset_lo", v + 1)
            elif isinstance(f, GreaterThanOrEqual):
                bounds.at_least("offset_lo", v)
            elif isinstance(f, LessThan):
                bounds.below("offset_hi", v)
            elif isinstance(f, LessThanOrEqual):
                bounds.below("offset_hi", v + 1)
            else:
                ok = False
        elif col == "timestamp" and not isinstance(f, In):
            us = _micros(getattr(f, "value", None))
            if us is not None:
                ok = True
                if isinstance(f, EqualTo):
                    if us % 1000:
                        bounds.at_least("ts_lo", 1)
                        bounds.below("ts_hi", 0)     # no ms timestamp equals it: empty
                    else:
                        bounds.at_least("ts_lo", us // 1000)
                        bounds.below("ts_hi", us // 1000 + 1)
                elif isinstance(f, GreaterThan):
                    bounds.at_least("ts_lo", _floor_ms(us) + 1)
                elif isinstance(f, GreaterThanOrEqual):
                    bounds.at_least("ts_lo", _ceil_ms(us))
                elif isinstance(f, LessThan):
                    bounds.below("ts_hi", _ceil_ms(us))
                elif isinstance(f, LessThanOrEqual):
                    bounds.below("ts_hi", _floor_ms(us) + 1)
                else:
                    ok = False
        if not ok:
            rest.append(f)
    return rest


def offset_window(bounds: Bounds, start: int, end: int) -> Tuple[int, int]:
    """Intersect a partition's ``[start, end)`` with the pushed offset bounds."""
    if bounds.offset_lo is not None:
        start = max(start, bounds.offset_lo)
    if bounds.offset_hi is not None:
        end = min(end, bounds.offset_hi)
    return start, max(start, end)
