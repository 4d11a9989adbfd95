"""The worker process: its lifecycle and the parts it holds.

The parts: pool, claimer, completer, leases, maintenance runner (see ``jobs.worker.lifecycle``).
"""
