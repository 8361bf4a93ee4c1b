"""Partition assignors the group leader runs: ``range``, ``roundrobin``, ``cooperative-sticky``.

The names are the protocol names Kafka's and librdkafka's consumers announce
in JoinGroup, so a group mixing kafkawire with those clients agrees on one.
Each assignor maps ``{member_id: Subscription}`` and the partition counts of
the subscribed topics to ``{member_id: [(topic, partition), ...]}``.

``cooperative-sticky`` (incremental rebalancing) keeps every partition with
its current owner where balance allows, and leaves a partition that must move
out of this round's assignment: its owner revokes it, rejoins, and the next
round hands it to its new owner, so no partition has two owners at once.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Mapping, Optional, Set, Tuple

from kafkawire.client.group_metadata import Subscription, TopicPartition

__all__ = ["Assignor", "RangeAssignor", "RoundRobinAssignor", "CooperativeStickyAssignor",
           "ASSIGNORS", "get_assignor"]

Plan = Dict[str, List[TopicPartition]]


class Assignor:
    """Base: ``name`` is the JoinGroup protocol name; ``cooperative`` selects incremental rebalancing."""

    name = ""
    cooperative = False

    def user_data(self, owned: List[TopicPartition], generation: int) -> Optional[bytes]:
        """Opaque bytes a member adds to its subscription (None: none)."""
        return None

    def assign(self, partitions: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Plan:
        raise NotImplementedError


def _members_by_topic(subscriptions: Mapping[str, Subscription],
                      partitions: Mapping[str, int]) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = defaultdict(list)
    for member in sorted(subscriptions):
        for t in set(subscriptions[member].topics):
            if t in partitions:
                out[t].append(member)
    return out


class RangeAssignor(Assignor):
    """Per topic, consecutive ranges of partitions to the members sorted by id (Kafka's ``range``)."""

    name = "range"

    def assign(self, partitions, subscriptions):
        plan: Plan = {m: [] for m in subscriptions}
        for topic, members in sorted(_members_by_topic(subscriptions, partitions).items()):
            n = partitions[topic]
            per, extra = divmod(n, len(members))
            start = 0
            for i, m in enumerate(members):
                count = per + (1 if i < extra else 0)
                plan[m].extend((topic, p) for p in range(start, start + count))
                start += count
        return plan


class RoundRobinAssignor(Assignor):
    """All partitions sorted by topic then number, dealt in turn to the members subscribed to each."""

    name = "roundrobin"

    def assign(self, partitions, subscriptions):
        plan: Plan = {m: [] for m in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return plan
        subs = {m: set(subscriptions[m].topics) for m in members}
        i = 0
        for topic in sorted(t for t in partitions if any(t in s for s in subs.values())):
            for p in range(partitions[topic]):
                while topic not in subs[members[i % len(members)]]:
                    i += 1
                plan[members[i % len(members)]].append((topic, p))
                i += 1
        return plan


class CooperativeStickyAssignor(Assignor):
    """Balanced, sticky, incremental (KIP-429): moving partitions wait one round to change owner."""

    name = "cooperative-sticky"
    cooperative = True

    def assign(self, partitions, subscriptions):
        members = sorted(subscriptions)
        subs = {m: set(subscriptions[m].topics) for m in members}
        all_tps = sorted((t, p) for t in partitions if any(t in s for s in subs.values())
                         for p in range(partitions[t]))
        valid = set(all_tps)
        # 1. Previous owners, resolving double claims by the higher generation (none if tied).
        claims: Dict[TopicPartition, List[Tuple[int, str]]] = defaultdict(list)
        for m in members:
            s = subscriptions[m]
            for tp in s.owned_partitions:
                if tp in valid and tp[0] in subs[m]:
                    claims[tp].append((s.generation_id, m))
        owner: Dict[TopicPartition, str] = {}
        for tp, cs in claims.items():
            cs.sort(reverse=True)
            if len(cs) == 1 or cs[0][0] > cs[1][0]:
                owner[tp] = cs[0][1]
        plan: Dict[str, List[TopicPartition]] = {m: [] for m in members}
        for tp in all_tps:
            if tp in owner:
                plan[owner[tp]].append(tp)
        # 2. Balance: cap every member at the ceiling of a fair share, give the rest to the
        #    least loaded eligible member, then move single partitions from the most to the
        #    least loaded while that narrows the gap by two or more.
        n = len(all_tps)
        quota = -(-n // len(members)) if members else 0
        unassigned: List[TopicPartition] = [tp for tp in all_tps if tp not in owner]
        for m in members:
            if len(plan[m]) > quota:
                plan[m].sort()
                unassigned.extend(plan[m][quota:])
                plan[m] = plan[m][:quota]
        unassigned.sort()
        for tp in unassigned:
            eligible = [m for m in members if tp[0] in subs[m]]
            if eligible:
                target = min(eligible, key=lambda m: (len(plan[m]), m))
                plan[target].append(tp)
        self._rebalance(plan, subs)
        # 3. Incremental step: a partition whose previous owner is another member is left out
        #    this round; its owner revokes it and the follow-up rebalance assigns it.
        result: Plan = {}
        for m in members:
            result[m] = sorted(tp for tp in plan[m] if owner.get(tp, m) == m)
        return result

    @staticmethod
    def _rebalance(plan: Dict[str, List[TopicPartition]], subs: Dict[str, Set[str]]) -> None:
        members = sorted(plan)
        for _ in range(sum(len(v) for v in plan.values()) + 1):
            moved = False
            for src in sorted(members, key=lambda m: (-len(plan[m]), m)):
                for dst in sorted(members, key=lambda m: (len(plan[m]), m)):
                    if len(plan[src]) - len(plan[dst]) < 2:
                        continue
                    movable = sorted(tp for tp in plan[src] if tp[0] in subs[dst])
                    if movable:
                        tp = movable[-1]
                        plan[src].remove(tp)
                        plan[dst].append(tp)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return


ASSIGNORS = {a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)}


def get_assignor(spec) -> Assignor:
    """An assignor from its protocol name, an :class:`Assignor` class, or an instance."""
    if isinstance(spec, Assignor):
        return spec
    if isinstance(spec, type) and issubclass(spec, Assignor):
        return spec()
    name = str(spec).strip().lower().replace("_", "-")
    if name in ASSIGNORS:
        return ASSIGNORS[name]()
    raise ValueError(f"unknown partition assignment strategy {spec!r}; use one of "
                     f"{sorted(ASSIGNORS)} or an Assignor")
