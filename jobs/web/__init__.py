"""The user's and operator's HTTP endpoints: the status view, ops endpoints, health."""
