"""Test support: chains of fake describers and generators in a store (tests/unit/store/test_store_*.py)."""

from PIL import Image

from lmms_genbench.engine import ChainJob, ChainSpec, CycleEngine
from lmms_genbench.store import ArtifactStore

from tests.support.fakes import FakeDescriber, FakeGenerator


def spec_of(iterations=2):
    return ChainSpec.from_request("Describe the image.", {"iterations": iterations})


def jobs_of(store, spec, n=3):
    ns = store.namespace("d", "g", spec.protocol_id("test"))
    seeds = [Image.new("RGB", (16, 16), (20 * i, 100, 200)) for i in range(n)]
    return [ChainJob(str(k), spec, store.chain(ns, str(k)), (lambda s=s: [s])) for k, s in enumerate(seeds)]


def hop_bytes(jobs):
    """Every hop file of every chain: path -> bytes."""
    return {p: p.read_bytes() for j in jobs for p in sorted(j.location.directory.glob("[0-9][0-9][0-9].*"))}


def complete_store(tmp_path, n=3):
    """A store of ``n`` finished two-hop chains: their jobs and every hop file's bytes."""
    store, spec = ArtifactStore(tmp_path), spec_of()
    jobs = jobs_of(store, spec, n)
    outcomes, _ = CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    assert all(o.ok for o in outcomes)
    return jobs, hop_bytes(jobs)
