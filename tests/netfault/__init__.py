"""The network-fault tier: ZooKeeper members and clients in network namespaces (`NetworkLab`).

Scenarios cut an ensemble member off from its peers, blackhole a client
(both directions, or only what the servers send it) and slow every client
link, each checked for safety (`safety`).  Run on demand, as root::

    .venv/bin/pytest -m netfault tests/netfault -q

Without root, ``ip``, ``tc`` or ``nft`` every test here is skipped with the
reason; see docs/reliability.md.
"""
