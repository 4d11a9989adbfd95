"""Database tests: one part against the real database (SQLite or PostgreSQL), in-process."""
