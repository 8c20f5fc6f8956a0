"""Helpers every layer may use: the task queue, client addresses, health checks, the database
backend. Imports nothing from the domain apps or the edges."""
