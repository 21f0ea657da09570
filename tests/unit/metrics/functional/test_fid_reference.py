"""FID with one side factorised once (FrechetReference) and FrechetStats without D x D
temporaries: hand-worked numbers, agreement with the D x D forms, and memory."""

import tracemalloc

import numpy as np
import pytest

from lmms_genbench.metrics.functional.fid import FrechetReference, FrechetStats, frechet_distance


def test_low_rank_fid_by_hand():
    # seeds (0,0,0), (2,0,0): mean (1,0,0), S1 = diag(2, 0, 0)
    # redraws (0,0,0), (1,1,0): mean (.5,.5,0), S2 = [[.5,.5,0],[.5,.5,0],[0,0,0]]
    # S1 S2 = [[1,1,0],0,0] has eigenvalues 1, 0, 0, so Tr((S1 S2)^1/2) = 1;
    # FID = |mu1 - mu2|^2 + Tr S1 + Tr S2 - 2 = 0.5 + 2 + 1 - 2 = 1.5
    seeds = FrechetStats.from_features([[0, 0, 0], [2, 0, 0]])
    redraws = FrechetStats.from_features([[0, 0, 0], [1, 1, 0]])
    ref = seeds.reference()
    assert isinstance(ref, FrechetReference) and "low-rank" in repr(ref)
    assert ref.fid(redraws) == pytest.approx(1.5, abs=1e-12)
    assert seeds.fid(redraws, method="factored") == pytest.approx(1.5, abs=1e-12)
    assert redraws.reference().fid(seeds) == pytest.approx(1.5, abs=1e-12)  # symmetric


def _stream(features, chunks):
    stats = FrechetStats()
    for chunk in np.array_split(features, chunks):
        stats.update(chunk)
    return stats


@pytest.mark.parametrize("n_ref,n_other", [(300, 200), (20, 200), (200, 20), (20, 30)])
def test_every_form_agrees_with_the_d_by_d_distance(n_ref, n_other):
    """Full x full, low-rank x full, full x low-rank, low-rank x low-rank (D = 64)."""
    rng = np.random.default_rng(n_ref + n_other)
    a, b = rng.normal(size=(n_ref, 64)), rng.normal(size=(n_other, 64)) * 1.3 + 0.2
    sa, sb = _stream(a, 5), _stream(b, 3)
    expected = frechet_distance(a.mean(0), np.cov(a, rowvar=False), b.mean(0), np.cov(b, rowvar=False))
    # sqrtm of a singular product carries its own rounding (~1e-8 relative here)
    tol = 1e-10 if min(n_ref, n_other) > 64 else 1e-7
    assert sa.reference().fid(sb) == pytest.approx(expected, rel=tol)


def test_the_low_rank_form_is_exact_where_the_d_by_d_form_is_not():
    """FID of a set with itself is 0. Six 512-d vectors: the D x D eigh form takes square
    roots of ~500 rounding-noise eigenvalues; the 6 x 6 form has none to take."""
    x = np.random.default_rng(0).normal(size=(6, 512)) * 0.3 + 1.0
    stats = FrechetStats.from_features(x)
    assert abs(stats.reference().fid(stats)) < 1e-10
    assert abs(stats.fid(stats, method="eigh")) > 1e-8  # the old path's bias, for the record


def test_the_reference_is_factorised_once(monkeypatch):
    rng = np.random.default_rng(1)
    seeds = _stream(rng.normal(size=(100, 16)), 4)
    others = [_stream(rng.normal(size=(50, 16)) + t, 2) for t in range(3)]
    expected = [seeds.fid(o) for o in others]
    ref = seeds.reference()
    calls = []
    real = np.linalg.eigh
    monkeypatch.setattr(np.linalg, "eigh", lambda m: calls.append(m.shape) or real(m))
    assert [ref.fid(o) for o in others] == pytest.approx(expected, rel=1e-10)
    assert calls == [(16, 16)]  # S1^(1/2) once for three distances


def test_low_rank_distances_form_no_d_by_d_matrix():
    d = 2048
    rng = np.random.default_rng(2)
    seeds = FrechetStats.from_features(rng.normal(size=(6, d)))
    redraws = [FrechetStats.from_features(rng.normal(size=(6, d)) + t) for t in range(3)]
    tracemalloc.start()
    try:
        ref = seeds.reference()
        for other in redraws:
            ref.fid(other)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < d * d * 8 / 16, peak  # a D x D float64 matrix is 32 MB; this stays under 2 MB


def test_a_merge_allocates_no_d_by_d_temporary():
    d = 512
    rng = np.random.default_rng(3)
    stats = FrechetStats()
    stats.update(rng.normal(size=(d + 10, d)))  # past D: the moment matrix is held
    batch = rng.normal(size=(8, d))
    tracemalloc.start()
    try:
        stats.update(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < d * d * 8 / 4, peak  # before: centred.T @ centred and np.outer, 2 MB each


def test_rows_and_moment_states_stream_and_merge_alike():
    """Rows are kept up to n = D, then M2; every way of streaming and merging gives np.cov."""
    rng = np.random.default_rng(4)
    d = 10
    x = rng.normal(size=(25, d)) + 3.0
    for sizes in ((3, 4, 2), (3, 4, 2, 16), (12, 13), (1,) * 25):
        stats, start = FrechetStats(), 0
        for size in sizes:
            stats.update(x[start : start + size])
            start += size
        seen = x[:start]
        np.testing.assert_allclose(stats.mean, seen.mean(0), atol=1e-12)
        np.testing.assert_allclose(stats.cov, np.cov(seen, rowvar=False), atol=1e-12)
        assert stats.state_dict()["m2"].shape == (d, d)
    small_a, small_b = FrechetStats.from_features(x[:4]), FrechetStats.from_features(x[4:9])
    big = FrechetStats.from_features(x[9:])
    for left, right, rows in ((small_a, small_b, x[:9]), (small_a, big, np.concatenate([x[:4], x[9:]])),
                              (big, small_b, np.concatenate([x[9:], x[4:9]])), (small_a + small_b, big, x)):
        merged = left + right
        np.testing.assert_allclose(merged.cov, np.cov(rows, rowvar=False), atol=1e-12)
        np.testing.assert_allclose(merged.mean, rows.mean(0), atol=1e-12)
    assert small_a.n == 4 and small_b.n == 5  # inputs unchanged
    np.testing.assert_allclose(small_a.cov, np.cov(x[:4], rowvar=False), atol=1e-12)
    back = FrechetStats.from_state_dict(small_a.state_dict())  # M2 only: the D x D form
    assert back.reference().fid(big) == pytest.approx(small_a.reference().fid(big), rel=1e-7)


def test_reference_errors():
    one = FrechetStats.from_features(np.zeros((1, 3)))
    two = FrechetStats.from_features(np.eye(3)[:2])
    with pytest.raises(ValueError, match="the reference has n=1"):
        one.reference()
    with pytest.raises(ValueError, match="other has n=1"):
        two.reference().fid(one)
    with pytest.raises(ValueError, match="dimension 3 and 4"):
        two.reference().fid(FrechetStats.from_features(np.eye(4)[:2]))
    with pytest.raises(TypeError, match="must be FrechetStats"):
        FrechetReference("x")
