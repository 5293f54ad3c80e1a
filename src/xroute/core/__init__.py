"""The routing core: what a topology is (`model`, `topology`), how a message is checked and
routed through it (`keys`, `headers`, `values`, `field_table`, `destinations`), the caches that
make repeated routes cheap (`route_cache`, `literal_routes`, `wildcard_queues`), batches
(`batch`, `_batch_kernel`), dead-lettering, version profiles and the errors. Pure: no files, no
sockets, no Spark; the engines (`xroute.engines`) and exchange types (`xroute.exchanges`) are
its parts, and every other package is an edge around it."""
