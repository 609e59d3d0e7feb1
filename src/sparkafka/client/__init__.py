"""The one Kafka client layer, in one direction of use: each module imports only those above it here.

- ``conf``: librdkafka settings: checks, secret masking, Java client names, kafka-python's spelling;
- ``log``: librdkafka's log lines through the logger ``sparkafka.librdkafka``, rate-limited;
- ``security``: who the client is, and one sentence for each refusal by TLS, SASL or an ACL;
- ``core``: construction of every client, the per-process caches, retries, and how failures are worded;
- ``contact``: the first contact with the brokers, an answer or one sentence within seconds;
- ``broker_gaps``: a broker's gaps (tansu's), handled in one place, found by probes, free on Apache Kafka;
- ``raw_log``: a partition's batches as stored, transaction markers included (kafka-python raw fetches);
- ``metadata``: ``AdminMetadata``, the driver's retried cluster lookups (uses ``broker_gaps`` for ends);
- ``probes``: capability probes of a broker (``sparkafka doctor``, the tests' ``require``).
"""
