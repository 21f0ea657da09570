"""The one handler (hooks/signals.py, hooks/startup.py; issue 52): which command lines get it at
start-up, and a third signal ends the process whichever thread the kernel delivers it to (a child
process: the handler ends its process). Every phase of a real run, in both installs:
tests/e2e/test_installs_e2e.py."""

import signal
import subprocess
import sys
import time

import pytest

from lmms_genbench.hooks.startup import command_model

LINE = "lmms-genbench: interrupted by SIGTERM; rerun the same command to resume"


@pytest.mark.parametrize("argv, model", [
    (["--model", "cycle", "--tasks", "x"], "cycle"),
    (["--tasks", "x", "--model=t2i"], "t2i"),
    (["--model_args", "a=1", "--model", "llava_hf"], "llava_hf"),
    (["--model_args", "--model"], None),  # no value
    (["tasks", "list"], None),
])
def test_the_command_model_is_read_as_lmms_eval_reads_it(argv, model):
    assert command_model(argv) == model


def _child(blocked_on: str, to: str) -> subprocess.CompletedProcess:
    """A process inside a simple_evaluate of ours (handling()) whose main thread blocks on
    ``blocked_on`` while a worker sends three SIGTERMs ``to`` itself or the process."""
    code = f"""
import os, signal, threading, time
from lmms_genbench.hooks.signals import handling
def send():
    time.sleep(0.5)
    for _ in range(3):
        if {to!r} == "thread":
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        else:
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.3)
with handling():
    threading.Thread(target=send, daemon=True).start()
    try:
        {blocked_on}
    except KeyboardInterrupt:  # the first: the run drains, blocked, as a store writer's join is
        threading.Event().wait(20)
print("drained")
"""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("to", ["thread", "process"])
def test_a_third_signal_ends_the_process_at_once_whichever_thread_receives_it(to):
    began = time.monotonic()
    proc = _child("threading.Event().wait(20)", to)
    took = time.monotonic() - began
    assert proc.returncode == 128 + signal.SIGTERM, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == LINE and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count(LINE) == 1 and "drained" not in proc.stdout
    assert took < 15, took  # not the 20 s the blocked main thread waits
