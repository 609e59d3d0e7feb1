"""``sparkafka run pipeline.toml``: a Kafka-to-Kafka Spark pipeline declared in a TOML file."""
