from kafkawire.spark.source import KafkaWireDataSource as DefaultSource  # noqa: F401
