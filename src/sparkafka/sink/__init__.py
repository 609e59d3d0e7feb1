"""The Kafka sink: at-least-once, or exactly-once by two-phase commit over Kafka transactions."""
