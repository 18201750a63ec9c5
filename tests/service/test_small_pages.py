"""``rounds.small_pages``: the service turns numpy's huge pages off for itself and the re-plan
children it forks (their fresh 2 MB pages, zeroed by the kernel, starved a 2-core machine in
bursts after each fork: issue 27, session 17)."""

from __future__ import annotations

from chronus_py.service.rounds import small_pages

try:
    from numpy._core import multiarray
except ImportError:  # numpy 1.x, as small_pages itself reads it
    from numpy.core import multiarray


def test_small_pages_turns_numpy_huge_pages_off():
    before = multiarray._get_madvise_hugepage()
    try:
        multiarray._set_madvise_hugepage(True)
        small_pages()
        assert multiarray._get_madvise_hugepage() is False
    finally:
        multiarray._set_madvise_hugepage(before)
