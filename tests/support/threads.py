"""torch on one thread for a while: tiny networks' ops on a shared 2-core machine only make
torch's worker threads spin and contend (tens of times slower); their numbers do not change."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def single_thread() -> Iterator[None]:
    """torch's thread count 1 inside, the previous count restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
