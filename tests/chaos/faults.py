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

`plan` says what happens when (seconds from the start of the fault phase)
and for how long; the orchestrator executes it (timing may slip: a member
takes seconds to start) and logs what it really did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ("ENSEMBLE_KINDS", "PARTICIPANT_KINDS", "Fault", "plan")

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


@dataclass(frozen=True, slots=True)
class Fault:
    """One planned fault: `kind` on `target` at `at` s, healed `hold` s later.

    `target` is a participant index (participant lane) or a member index
    (``member_restart``; ``leader_kill`` picks the leader when it runs: -1).
    `version` is the version a killed participant comes back with.
    """

    lane: str
    at: float
    kind: str
    target: int
    hold: float
    version: str | None = None


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
) -> list[Fault]:
    """Every fault of a campaign of `seconds`, ordered by start time.

    The same arguments always give the same list.  Gaps between two faults of
    a lane are drawn uniformly from `participant_gap` / `ensemble_gap`; a
    fraction `calm_spells` of the participant lane's gaps last 6–10 s.
    """
    if participants < 1 or seconds <= 0:
        raise ValueError("a campaign needs a participant and a positive duration")
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = rng.uniform(0.5, 2.0)
    while at < seconds:
        kind = _pick(rng, PARTICIPANT_KINDS)
        target = rng.randrange(participants)
        hold = _hold(rng, kind, session_timeout)
        version = rng.choice(("1.0", "1.0", "1.1")) if kind == "kill" else None
        faults.append(Fault("participant", at, kind, target, hold, version))
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
