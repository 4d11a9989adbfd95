"""The worker process: its lifecycle and the parts it holds (children, claims, leases, upkeep)."""
