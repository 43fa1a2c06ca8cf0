"""Pure decisions of task leadership: which workers may lead, which one leads a task, what to do.

Nothing here does I/O or awaits, so every rule is tested directly.

Candidates
    The workers of the newest version present (``prefer="oldest"``: the
    oldest).  Versions are compared with `<` on their keys (Maven
    `ComparableVersion` by default).  The preferred versions are those that
    no other present version beats.  Maven's order is not transitive for some
    unusual versions (``1 < 1-a``, ``1-a < 1-0.rc``, ``1-0.rc < 1``): when such
    a cycle leaves no version unbeaten, the rule falls back to a Copeland
    count (wins minus losses against the other present versions) and, among
    the best, to the greatest version text (the least for ``"oldest"``) in
    Java's `String.compareTo` order (UTF-16 code units), taking each set of
    equal versions by its least text.  Every worker and every Java service
    that implements this rule reaches the same answer whatever order it read
    the versions in.

Balanced rendezvous
    With ``m`` tasks over ``n`` candidates, ``q, r = divmod(m, n)``: ``r``
    candidates lead ``q + 1`` tasks and the others ``q``.  Every (task,
    candidate) pair has the rank ``blake2b(task + "\\0" + worker_id,
    digest_size=8)`` read as a big-endian unsigned integer.  The pairs are
    taken from the highest rank down (ties, which need a 64-bit collision, to
    the greater worker id, then the greater task, both compared as UTF-8
    bytes); a pair gives its task to its candidate unless the task is already
    given or the candidate is full.  A candidate is full at ``q + 1`` tasks,
    or at ``q`` once ``r`` candidates have reached ``q + 1``.  Every task is
    given (the capacities add up to ``m``), the loads differ by at most one,
    and the result does not depend on the order tasks or workers are listed
    in.  It is the stable assignment of tasks to capacity-limited candidates
    when both sides rank by the pair's hash, so a join or a leave moves mostly
    the tasks that candidate takes or held, and a few more as the capacities
    change (docs/task-leadership.md has the measured moves, and why no rule
    of the names alone can bound them at the changed candidate's share plus
    one).  With one task it is plain rendezvous hashing.

Per-task step
    `next_step` maps what a worker knows about one task to the next step of
    its small loop: acquire the leader node, grant or revoke the right to run
    ``lead()`` bodies, delete the node (hand-over), verify it, or wait.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

__all__ = (
    "Action",
    "Assignment",
    "Prefer",
    "Step",
    "TaskState",
    "VersionKey",
    "assign",
    "balanced_rendezvous",
    "java_text_order",
    "next_step",
    "preferred_versions",
    "rendezvous_rank",
)

CLOCK_SLACK = 0.002
"""Seconds by which a settle delay counts as over early: event loop clocks and timers
are millisecond-grained (uvloop), and every task whose delay ends at one moment
must see it ended in the same pass, so that they hand over together."""

Prefer = Literal["newest", "oldest"]
VersionKey = Callable[[str], Any]
"""Maps a version text to an object ordered by ``<`` (newer is greater); may raise on bad text."""


def java_text_order(text: str) -> bytes:
    """A sort key ordering strings as Java's `String.compareTo` does (by UTF-16 code unit)."""
    return text.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Preference:
    """The version texts whose workers are candidates; `cyclic` if the fallback decided."""

    versions: frozenset[str]
    cyclic: bool = False


def preferred_versions(
    versions: Iterable[str], *, prefer: Prefer, version_key: VersionKey
) -> Preference:
    """The preferred version texts among `versions` (see the module docs for the rule).

    The result does not depend on the order of `versions`.  Raises whatever
    `version_key` raises for a bad text (callers validate texts first).
    """
    texts = sorted(set(versions), key=java_text_order)
    if not texts:
        return Preference(frozenset())
    keys = {text: version_key(text) for text in texts}

    def newer(a: str, b: str) -> bool:
        return bool(keys[b] < keys[a]) if prefer == "newest" else bool(keys[a] < keys[b])

    # Sets of equal versions ("1", "1.0", "1-ga"), each led by its least text.
    classes: list[list[str]] = []
    for text in texts:
        for members in classes:
            if not newer(text, members[0]) and not newer(members[0], text):
                members.append(text)
                break
        else:
            classes.append([text])
    heads = [members[0] for members in classes]
    unbeaten = [i for i, a in enumerate(heads) if not any(newer(b, a) for b in heads if b is not a)]
    if unbeaten:
        return Preference(frozenset(t for i in unbeaten for t in classes[i]))
    # A cycle: no version is unbeaten.  Copeland score, then the version text.
    scores = [
        sum(newer(a, b) for b in heads if b is not a)
        - sum(newer(b, a) for b in heads if b is not a)
        for a in heads
    ]
    best = max(scores)
    tied = [i for i, score in enumerate(scores) if score == best]
    pick = max if prefer == "newest" else min
    chosen = pick(tied, key=lambda i: java_text_order(heads[i]))
    return Preference(frozenset(classes[chosen]), cyclic=True)


def rendezvous_rank(task: str, worker_id: str) -> int:
    """The rendezvous (highest random weight) rank of `worker_id` for `task`; stable everywhere."""
    digest = hashlib.blake2b(
        task.encode("utf-8") + b"\0" + worker_id.encode("utf-8"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True, slots=True)
class Assignment:
    """Who should lead each task: `leaders` maps task -> worker id; `candidates` the eligible ids."""

    leaders: dict[str, str]
    candidates: frozenset[str]
    versions: frozenset[str]
    cyclic: bool = False


def assign(
    tasks: Iterable[str],
    workers: Mapping[str, str],
    *,
    prefer: Prefer = "newest",
    version_key: VersionKey,
) -> Assignment:
    """Choose a leader for every task among `workers` (worker id -> version text).

    The balanced rendezvous of the module docs over the preferred versions'
    workers.  With no workers every task is left out of `leaders`.
    """
    preference = preferred_versions(workers.values(), prefer=prefer, version_key=version_key)
    candidates = frozenset(w for w, v in workers.items() if v in preference.versions)
    leaders = balanced_rendezvous(tasks, candidates) if candidates else {}
    return Assignment(leaders, candidates, preference.versions, preference.cyclic)


def balanced_rendezvous(tasks: Iterable[str], candidates: Iterable[str]) -> dict[str, str]:
    """``{task: candidate}`` by the balanced rendezvous rule of the module docs (pure)."""
    names = sorted(set(tasks))  # code point order, which is the order of the UTF-8 bytes
    ids = sorted(set(candidates))
    if not ids:
        return {}
    if len(ids) == 1:
        return dict.fromkeys(names, ids[0])
    m, n = len(names), len(ids)
    q, r = divmod(m, n)
    size = m * n
    blake2b, from_bytes = hashlib.blake2b, int.from_bytes
    wbytes = [w.encode("utf-8") for w in ids]
    # One int per pair, rank first: a pair's index (candidate-major) breaks ties
    # toward the greater id, then the greater task, and ints sort fast.
    keys = [
        from_bytes(blake2b(prefix + wb, digest_size=8).digest(), "big") * size + wi * m + ti
        for ti, prefix in enumerate(t.encode("utf-8") + b"\0" for t in names)
        for wi, wb in enumerate(wbytes)
    ]
    keys.sort(reverse=True)
    loads = [0] * n
    given = [-1] * m
    left, reached = m, 0  # tasks not given yet; candidates at q + 1
    for key in keys:
        wi, ti = divmod(key % size, m)
        if given[ti] >= 0 or loads[wi] >= (q + 1 if reached < r else q):
            continue
        given[ti] = wi
        loads[wi] += 1
        if loads[wi] == q + 1:
            reached += 1
        left -= 1
        if not left:
            break
    return {task: ids[wi] for task, wi in zip(names, given, strict=True)}


# --- the per-task loop ----------------------------------------------------------------------


class Action(enum.Enum):
    """What one task's next step does (see `next_step`)."""

    IDLE = "idle"  # nothing to do until something changes
    WAIT = "wait"  # nothing until something changes or `Step.delay` passes
    ACQUIRE = "acquire"  # create the leader node
    GRANT = "grant"  # we hold the node: let lead() bodies run (after the old ones drained)
    REVOKE = "revoke"  # cancel lead() bodies and wait for them to finish
    DELETE = "delete"  # delete our leader node (bodies already drained)
    VERIFY = "verify"  # a deletion was seen on the path: is our node still there?
    DROP_STALE = "drop_stale"  # delete our node left from an earlier session, if still there
    EXIT = "exit"  # the task was removed and nothing of ours is left


class TaskState(NamedTuple):
    """What one worker knows about one task; the input of `next_step`.

    `usable`: connected and registered in the current session.  `view_current`:
    the worker list read last is still current (its watch has not fired).
    `desired`: the choice names this worker; `desired_for`: seconds since the
    choice for this task last changed (only asked for when it names another).
    `held`: we hold the leader node in the current session; `granted`: lead()
    bodies may run.  `stale`: a leader node of ours from an earlier session may
    still exist.  `verify`: a deletion was seen on the path while we held it.
    `blocked`: the last create found the node held by someone else and no event
    has come since.  `stopping`: the
    task is being removed (or the recipe closed).  `watching`: the leader
    watch is live (a worker that leads nothing and is chosen for nothing
    drops it); leadership starts only under it.

    A named tuple: built several times per task and step in a hand-over, and
    a frozen dataclass takes several times longer to build.
    """

    usable: bool
    view_current: bool = True
    watching: bool = True
    desired: bool = False
    desired_for: float = 0.0
    held: bool = False
    granted: bool = False
    stale: bool = False
    verify: bool = False
    blocked: bool = False
    stopping: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    """The next step for one task: its `action`, and for `Action.WAIT` the longest wait."""

    action: Action
    delay: float | None = None


# The steps without a delay, made once: `next_step` runs several times per task and step.
_STEPS = {action: Step(action) for action in Action}


def next_step(state: TaskState, *, settle: float) -> Step:
    """The next step for one task, from what this worker knows about it.

    A worker acquires a task it should lead at once; it gives up a task it
    leads only after the choice has named another worker for `settle`
    seconds (a flapping worker does not bounce tasks), and only after its
    bodies have drained (revoke, then delete: drain-then-delete).
    """
    if state.stopping:
        if state.granted:
            return _STEPS[Action.REVOKE]
        if not state.usable:
            return _STEPS[Action.IDLE]
        if state.held:
            return _STEPS[Action.DELETE]
        if state.stale:
            return _STEPS[Action.DROP_STALE]
        return _STEPS[Action.EXIT]
    if not state.usable:
        return _STEPS[Action.IDLE]
    if state.stale:
        return _STEPS[Action.DROP_STALE]
    if state.held:
        if state.verify:
            return _STEPS[Action.VERIFY]
        if state.desired:
            if state.granted or not state.watching:
                return _STEPS[Action.IDLE]
            return _STEPS[Action.GRANT]
        if not state.view_current:
            return _STEPS[Action.IDLE]  # hand over only on a current worker list
        if state.desired_for >= settle - CLOCK_SLACK:
            return _STEPS[Action.REVOKE if state.granted else Action.DELETE]
        return Step(Action.WAIT, settle - state.desired_for)
    if state.granted:
        return _STEPS[Action.REVOKE]  # the node is gone: bodies must stop
    if state.desired and state.view_current and state.watching and not state.blocked:
        return _STEPS[Action.ACQUIRE]
    return _STEPS[Action.IDLE]
