"""The network-fault tier: ZooKeeper members and clients in network namespaces (`NetworkLab`).

Scenarios cut an ensemble member off from its peers, blackhole a client
(both directions, or only what the servers send it), slow every client link
(netem, or a delay relay per client where the kernel has none) and run the
CAS lock and `once_per` on wall clocks that are off (libfaketime), each
checked for safety (`safety`).  Run on demand, as root::

    .venv/bin/pytest -m netfault tests/netfault -q
    .venv/bin/python -m tests.netfault.repeat --runs 10   # each scenario 10 times, a table

Without root, ``ip``, ``tc`` or ``nft`` every test here is skipped with the
reason; see docs/reliability.md.
"""
