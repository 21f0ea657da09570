"""benchmarks/unified_throughput.py's authors' arm is a port of the authors' calls on the same
networks: for each system's tiny parity checkpoint it describes, greedily, the text ours describes,
and draws the image ours draws (Janus's port samples as DeepSeek does, with ``multinomial``, ours
with per-row Gumbel noise: the same size, not the same pixels); and ``--quick`` prints every row."""

import subprocess
import sys

import numpy as np
import pytest

from tests.support.scripts import ROOT, load_script
from tests.support.threads import single_thread

pytest.importorskip("torch")
SYSTEMS = ("showo", "janus", "vila_u", "blip3o", "bagel")


@pytest.mark.parametrize("name", SYSTEMS)
def test_the_authors_port_describes_and_draws_what_ours_does(name):
    ut = load_script("benchmarks/unified_throughput.py", "unified_throughput")
    describe, draw = load_script("benchmarks/unified_authors.py", "unified_authors").AUTHORS[name]
    with single_thread():
        model = ut.tiny(name, "cpu", 2, 6)
        image = ut._images(2)[1]
        theirs = describe(model, image, ut.QUESTION, 6)
        ours = model.describe([image], ut.QUESTION, {"max_new_tokens": 6, "temperature": 0, "do_sample": False})[0]
        drawn, ours_drawn = draw(model, "two cats", 3), model.generate(["two cats"], [3])[0]
    assert theirs.strip() == ours.strip()
    assert drawn.size == ours_drawn.size
    if name != "janus":
        assert np.array_equal(np.asarray(drawn), np.asarray(ours_drawn))


def test_quick_prints_every_system_and_arm():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "unified_throughput.py"), "--quick",
                           "--threads", "1", "--repeats", "1"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in proc.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| system")]
    assert {(r[0], r[2], r[3]) for r in rows} == {(n, arm, b) for n in SYSTEMS for arm, b in
                                                      [("authors", "1"), ("ours", "1"), ("floor", "1"),
                                                       ("ours", "4"), ("floor", "4")]}
    assert all(r[4] != "-" and not r[6] for r in rows), proc.stdout
