"""Chain locks hold under lmms-eval's filelock patch, in a child process that imports lmms-eval's
evaluator (the in-process checks: tests/unit/store/test_store_integrity.py)."""



# a child process that imports lmms-eval's evaluator: 15 s
def test_chain_locks_hold_under_lmms_evals_filelock_patch():
    """lmms-eval makes every FileLock(path) of a process one shared reentrant instance; the
    chain lock must still keep a second run (here: a second lock set in one process) out."""
    import subprocess
    import sys

    code = ("import lmms_eval.evaluator as e, tempfile, pathlib; e._enable_reentrant_filelocks()\n"
            "from lmms_genbench.store import ChainLocks\n"
            "d = pathlib.Path(tempfile.mkdtemp()); a, b = ChainLocks(), ChainLocks()\n"
            "print(a.try_acquire(d), b.try_acquire(d))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "True False", proc.stderr[-2000:]
