"""Work done for the whole queue: rescue of lapsed leases, pruning, periodic schedules, pausing."""
