"""The numbers that tune the cluster coordinator: chunk size, timeouts, idle and probe limits."""

# A lease is about this many seconds of a worker's part of the known rate (at least one request).
CHUNK_SECONDS = 0.1
# Every actor call is bounded by this (seconds): past it the coordinator counts as unreachable.
CALL_TIMEOUT_S = 30.0
# The longest the actor holds one lease call waiting for budget (a third of the call timeout at most).
LEASE_WAIT_S = 10.0
# A worker that has not called for this long (and had nothing in flight) gives its in-flight share back.
IDLE_S = 10.0
# A worker with nothing in flight and nothing asked for this long gives its share back at once (its tasks ended).
IDLE_GRACE_S = 0.5
# A probe whose answer was not reported after this long (its worker died) is handed to another worker.
PROBE_TIMEOUT_S = 60.0
# Lease calls one actor serves at once (waiting ones included): one per worker and key.
MAX_CALLS_IN_FLIGHT = 4096
