"""The ways a topology and its data come in: a definitions export (`definitions`, parsed into
plain records that `Topology.from_definitions` builds from), a live broker's management API
(`management`), and the storage any path or URI names (`storage`: local, s3://, gs://...)."""
