"""Unit tests: one part alone, no database, no process."""
