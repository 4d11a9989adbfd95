"""The worker process: its lifecycle and the parts it holds (pool, claimer, completer, leases)."""
