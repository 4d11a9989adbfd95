"""Process tests: real runworker processes, signals and subprocesses."""
