"""``chronus serve``: the scheduling loop as a long-running service, behind a backend interface."""
