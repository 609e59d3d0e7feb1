"""Operator tools: what a person runs beside the queries to look at and steer them, lookups only.

- ``lag``: consumer lag per partition (``sparkafka lag``);
- ``group_offsets``: a query's positions and a group's offsets, shown and moved (``sparkafka offsets``);
- ``committed_view``: the committed-view oracle, what a ``read_committed`` reader sees, from raw fetches;
- ``probes``: a broker's capabilities (``sparkafka doctor``, the tests' ``require``);
- ``query_progress``: reading Spark's query progress (offsets, how far behind, fresh batches);
- ``prometheus``: the metrics exporter for running queries.

They use the product (``source``, ``sink``) and the client layer, never the reverse; the pipeline runner and
the CLI use them.
"""
