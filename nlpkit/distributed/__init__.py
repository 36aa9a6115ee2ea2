"""The Dask path: shard inputs, map the counting core over shards, reduce partial counts.

Importing this package does not import dask; `cluster.connect` does, when ``--dask`` is
given. `nlpkit.shards` (the ground floor, no Dask) cuts files at record boundaries; `stages`
runs each subcommand's counting stage, declared in its wing's ``*_shards`` module, as a map over
shards (the same functions the local path uses) with a tree reduction, and finishes the small
sequential part in this process. This package imports the wings; no wing imports it. See
docs/scaling.md.
"""
