"""Declaring and enqueueing tasks: the registry, the insert path, payload rules, retry policy."""
