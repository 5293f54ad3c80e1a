"""RabbitMQ streams as a source of messages: what `xroute.spark.rabbitmq_stream` (the Spark
data source ``rabbitmq-stream``) and the commands read.

The modules, none of which knows Spark: `uri` (``rabbitmq-stream://`` URIs and the password),
`offsets` (``first``, ``last``, ``next``, an offset, a timestamp), `amqp10` (the AMQP 1.0
decoder that keeps each value's type), `records` (a stored message as one row of xroute's
message columns, or as a firehose trace record), `client` (the `rstream` client: the
stream's head and tail, and a bounded read of an offset range), `reconnect` (retrying while
the node is away) and `names` (streams named by a pattern, listed by the management API).
"""
