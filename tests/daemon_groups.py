"""The scheduler ``.ci/run``'s three xdist workers share the suite with (``-n 3 --dist
loadgroup``): ``--dist loadgroup``, with every test under a directory whose tests share one
private cluster for the session (``DAEMON_DIRS``) in one group.

A group runs on one worker, so each cluster starts once (not once per worker, which would
double the daemons on CI's two cores), and the two largest groups (these) go to different
workers first, where they overlap their waits on the daemons; every other test is its own unit
and fills in, on the third worker from the start. Three workers on two cores: the daemon
tests mostly wait, and with two workers the suite took 660 s on a fresh machine, with three
507 s (session 27). The groups are named by directory, not by ``xdist_group`` marks: pytest 9.2's
structured node ids drop the suffix by which xdist 3.8 carries a mark's group to the scheduler
(pytest-xdist issue 1386), so marks group nothing there. Marks still work where they do.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

# directory (a node id prefix) -> its group: the session fixtures ``slurm_lab``
# (tests/slurm/conftest.py) and ``control_plane`` (tests/kube/conftest.py)
DAEMON_DIRS = {"tests/slurm/": "slurm", "tests/kube/": "kube"}


class DaemonGroupScheduling(LoadGroupScheduling):
    def _split_scope(self, nodeid: str) -> str:
        for prefix, group in DAEMON_DIRS.items():
            if nodeid.startswith(prefix):
                return group
        return super()._split_scope(nodeid)
