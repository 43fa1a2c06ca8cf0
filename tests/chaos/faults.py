"""The fault schedule: a pure function of the seed, so a failing campaign can be replayed.

Two lanes run side by side, each one fault at a time:

- the participant lane hits one participant at a time: a cut of its
  connections (``cut``), a network pause shorter or longer than the session
  timeout (``net_pause_short`` / ``net_pause_long``, through the proxies that
  carry only that participant's traffic), a session expiry forced on the
  server (``expire``), SIGSTOP then SIGCONT, shorter or longer than the
  session timeout (``stop_short`` / ``stop_long``: the classic double-leader
  case), and SIGKILL followed by a new process (``kill``, which may come back
  with a newer version and so pull task leadership over to it);
- the ensemble lane hits ZooKeeper: a member stopped and started again
  (``member_restart``) or the current leader member SIGKILLed and started
  again (``leader_kill``); one member at a time, so a quorum always remains.

Most participant faults are aimed (``aim``): at whichever participant holds
a resource when the fault starts (the latch's leader, the CAS lock's or the
mutex's holder, the selector's leader, a task's leader, the scheduler's assigner, a worker running
a job, the cron job's leader), so that the faults that can break safety hit
the holders instead of being left to chance.  The orchestrator finds the
holder from the participants' logs and logs whom it hit; with no holder, the
planned `target` is hit.  Aims are drawn from a stream of their own, so a
seed's kinds, times and targets do not depend on them.

Java participants (`java`) are hit as the Python ones are: aimed faults hit
them when they hold, and `with_java` moves their share of the planned targets
to them (leaving a seed's kinds and times as they were).

`plan` says what happens when (seconds from the start of the fault phase)
and for how long; the orchestrator executes it (timing may slip: a member
takes seconds to start) and logs what it really did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

__all__ = ("AIMED", "AIMS", "ENSEMBLE_KINDS", "PARTICIPANT_KINDS", "Fault", "plan", "with_java")

# Relative weights of the participant lane's kinds.
PARTICIPANT_KINDS: dict[str, float] = {
    "cut": 2.0,
    "net_pause_short": 2.0,
    "net_pause_long": 2.0,
    "expire": 2.0,
    "stop_short": 1.5,
    "stop_long": 2.0,
    "kill": 1.5,
}
ENSEMBLE_KINDS: dict[str, float] = {"member_restart": 1.0, "leader_kill": 1.0}
# What an aimed participant fault hits (the holder of), with relative weights.
AIMS: dict[str, float] = {
    "latch": 2.0,
    "lock": 2.0,
    "mutex": 2.0,
    "selector": 1.5,
    "task": 1.0,
    "assigner": 1.5,
    "job": 1.0,
    "cron": 1.5,
}
AIMED = 0.7  # the share of participant faults aimed at a holder


@dataclass(frozen=True, slots=True)
class Fault:
    """One planned fault: `kind` on `target` at `at` s, healed `hold` s later.

    `target` is a participant index (participant lane) or a member index
    (``member_restart``; ``leader_kill`` picks the leader when it runs: -1).
    `version` is the version a killed participant comes back with; `aim`
    (participant lane) the resource whose holder it hits instead of `target`
    when there is one (see `AIMS`).
    """

    lane: str
    at: float
    kind: str
    target: int
    hold: float
    version: str | None = None
    aim: str | None = None


def _hold(rng: random.Random, kind: str, session_timeout: float) -> float:
    if kind in ("net_pause_short", "stop_short"):
        return rng.uniform(0.15, 0.5) * session_timeout
    if kind in ("net_pause_long", "stop_long"):
        return rng.uniform(1.3, 2.0) * session_timeout
    if kind == "kill":
        return rng.uniform(0.2, 2.0)  # until the new process is started
    if kind in ENSEMBLE_KINDS:
        return rng.uniform(0.5, 3.0)  # member down
    return 0.0


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    kinds = sorted(weights)
    return rng.choices(kinds, weights=[weights[k] for k in kinds])[0]


def plan(
    seed: int,
    seconds: float,
    participants: int,
    *,
    session_timeout: float,
    members: int = 3,
    participant_gap: tuple[float, float] = (0.3, 4.0),
    ensemble_gap: tuple[float, float] = (6.0, 16.0),
    calm_spells: float = 0.1,
    aimed: float = AIMED,
    aims: tuple[str, ...] | None = None,
    kinds: tuple[str, ...] | None = None,
) -> list[Fault]:
    """Every fault of a campaign of `seconds`, ordered by start time.

    The same arguments always give the same list.  Gaps between two faults of
    a lane are drawn uniformly from `participant_gap` / `ensemble_gap`; a
    fraction `calm_spells` of the participant lane's gaps last 6–10 s; a
    fraction `aimed` of the participant faults is aimed at a holder, of one
    of `aims` (default: every one of `AIMS`); `kinds` restricts the
    participant lane to those kinds (default: all of `PARTICIPANT_KINDS`).
    """
    lane_kinds = PARTICIPANT_KINDS if kinds is None else {k: PARTICIPANT_KINDS[k] for k in kinds}
    if not lane_kinds:
        raise ValueError(f"kinds must name some of {', '.join(PARTICIPANT_KINDS)}")
    weights = AIMS if aims is None else {a: AIMS[a] for a in aims}
    if not weights:
        raise ValueError(f"aims must name some of {', '.join(AIMS)}")
    if participants < 1 or seconds <= 0:
        raise ValueError("a campaign needs a participant and a positive duration")
    rng = random.Random(seed)
    arng = random.Random(seed * 104729 + 3)  # aims: a stream of their own
    faults: list[Fault] = []
    at = rng.uniform(0.5, 2.0)
    while at < seconds:
        kind = _pick(rng, lane_kinds)
        target = rng.randrange(participants)
        hold = _hold(rng, kind, session_timeout)
        version = rng.choice(("1.0", "1.0", "1.1")) if kind == "kill" else None
        aim = _pick(arng, weights) if arng.random() < aimed else None
        faults.append(Fault("participant", at, kind, target, hold, version, aim))
        # Now and then a calm spell, so that windows and elections run unhindered mid-campaign.
        gap = rng.uniform(*participant_gap) if rng.random() > calm_spells else rng.uniform(6, 10)
        at += hold + gap
    erng = random.Random(seed * 7919 + 1)  # its own stream: lanes do not shift each other
    at = erng.uniform(*ensemble_gap) / 2
    while at < seconds:
        kind = _pick(erng, ENSEMBLE_KINDS)
        target = erng.randrange(members) if kind == "member_restart" else -1
        hold = _hold(erng, kind, session_timeout)
        faults.append(Fault("ensemble", at, kind, target, hold))
        at += hold + erng.uniform(*ensemble_gap)
    faults.sort(key=lambda f: (f.at, f.lane))
    return faults


def with_java(faults: list[Fault], participants: int, java: int, seed: int) -> list[Fault]:
    """`faults` with a fair share of the participant lane's planned targets moved to `java`
    Java participants (indices `participants` ..), drawn from a stream of their own.

    Kinds, times, holds and aims stay as `plan` made them, so a seed plans the
    same faults with or without Java participants; only whom an unaimed fault
    (or an aimed one that finds no holder) hits changes.
    """
    if java <= 0:
        return list(faults)
    rng = random.Random(seed * 6151 + 5)
    out = []
    for f in faults:
        if f.lane == "participant" and rng.random() < java / (participants + java):
            f = replace(f, target=participants + rng.randrange(java))
        out.append(f)
    return out
