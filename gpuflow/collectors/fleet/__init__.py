"""The fleet collector: the hub's view of other agents, from their streams (``gpuflow hub``).

A collector like the others, registered as the plugin "fleet" (``DEFAULT_PLUGINS``): with no
targets it does nothing; given targets (``gpuflow hub --targets FILE`` / ``--target URL``, or
``GPUFLOW_HUB_TARGETS_FILE`` / ``GPUFLOW_HUB_TARGETS`` under gunicorn) it follows each agent's
``/api/stream?detail=summary`` on one asyncio thread and answers ``produce_snapshot`` with every
host's latest state, so the transport, the page and ``/metrics`` serve a fleet unchanged.
docs/fleet.md has the design and the deployment.

Layout, one job per module:

* ``options.py`` - its options (targets, SRV names, credentials, CA file, bounds);
* ``targets.py`` - what a target is; ``--target`` URLs and Prometheus file_sd files;
* ``srv.py`` - the agents a DNS SRV name lists (``--srv``), asked with the stdlib, as TTLs say;
* ``credentials.py`` - the bearer token of each target, from a private file read again on change;
* ``sse_events.py`` - Server-Sent Events read from untrusted bytes, within bounds;
* ``parse.py`` - a frame's plain form checked and turned into the snapshot's objects (the
  checks compiled in ``_checks_c``, its pure-Python twin its own converters);
* ``lane_columns.py`` - a watched host's span rows read straight into columns (``_rows_c``, its
  twin ``_rows_py``), and its lanes' samples joined;
* ``lane_keeper.py`` - a watched host's lanes kept from frame to frame, as its agent keeps them;
* ``link.py`` - one agent's connection: dial, read, up / stale / down, dial again with backoff;
* ``host_table.py`` - every host's latest state, shared with the frame thread, as one SnapshotPart;
* ``hub_loop.py`` - the asyncio thread: every link, the targets file, the sweeps;
* ``plugin.py`` - the hooks.

Importing this package starts nothing and imports no network library.
"""
