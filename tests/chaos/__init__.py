"""Fault campaigns: real processes, real faults, and a checker over what everyone believed.

Several participant processes (`participant`, running the `roles`) use the
leader latch, the CAS lock, the queued mutex, once_per, task leadership,
cron, the job scheduler, a tree cache, the semaphore, the read/write lock,
a group member and a service registration, a shared count and an atomic
long, a double barrier and a leader selector against a 3-member ZooKeeper
ensemble, beside Java participants (`java`: Curator's LeaderLatch,
LeaderSelector and InterProcessMutex, a JVM each, on the paths the Python
latch, selector and mutex use), while a seeded schedule (`faults`,
most of it aimed at whoever holds a resource at the time) cuts and pauses
their connections,
expires their sessions, restarts ensemble members, kills the ensemble's
leader, and SIGKILLs, SIGSTOPs and SIGCONTs the participants.  Each
participant logs every term it believes it holds and writes through a fenced
store (`store`), all in one log format (`records`); `checker` turns the logs
into a `report` (see its docstring for the invariants).  `campaign` is the
orchestrator.

The normal test suite runs one bounded campaign on a fixed seed
(``tests/zk/test_chaos.py``).  A longer one, on any seed::

    .venv/bin/python -m tests.chaos --seconds 600 --seed 7
    .venv/bin/python -m tests.chaos --seconds 120 --seed 3 --participants 5 --keep

prints the same report and exits 1 on any violation; ``--keep`` keeps the
logs (they are kept anyway when the campaign fails); ``--no-java`` leaves the
Java participants out (without ``javac`` or Debian's Curator jars they are
left out anyway, and the campaign says so).  The suite's campaign
can be lengthened or re-seeded without editing it:
``AIOCOORD_CHAOS_SECONDS=300 AIOCOORD_CHAOS_SEED=11 pytest tests/zk/test_chaos.py``.

``tests/mutants`` checks that this net catches what it claims: deliberately
broken variants of the library run in the participants
(``AIOCOORD_MUTANT``), and ``python -m tests.mutants`` fails unless each is
caught.
"""
