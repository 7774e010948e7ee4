"""The shared index on PostgreSQL (``backend = "postgres"``; the extra kbindex[postgres])."""
