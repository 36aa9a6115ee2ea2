"""The Dask path: shard inputs, map the counting core over shards, reduce partial counts.

Importing this package does not import dask; `cluster.connect` does, when ``--dask`` is
given. `shards` cuts files at record boundaries; `stages` runs each subcommand's counting
stage as a map over shards (the same functions the local path uses) with a tree reduction,
and finishes the small sequential part in this process. See docs/scaling.md.
"""
