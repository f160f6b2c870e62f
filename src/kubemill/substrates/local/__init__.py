"""The local substrate: a job's replicas as processes on this machine, state in SQLite."""
