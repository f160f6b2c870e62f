"""The pure reconciler: (job, Plan, observed, now) -> (actions, status). No I/O here."""
