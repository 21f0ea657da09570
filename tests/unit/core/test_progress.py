"""A message never shares a line with a progress bar (core/progress.py, issue 52): in a log file
(stderr no terminal, as lmms-eval's logs) the bar's line is ended before the message and the bar
goes on below it; a bar is closed on its own line however its loop ends."""

from __future__ import annotations

import io
import logging

import pytest

from lmms_genbench.core.progress import progress, say


def _log_file(monkeypatch):
    """stderr a log file (set in the test: pytest sets its own stderr again once setup is done)."""
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.delenv("VERBOSITY", raising=False)
    return stream


def test_a_warning_during_a_bar_starts_its_own_line(monkeypatch):
    stderr = _log_file(monkeypatch)
    log = logging.getLogger("lmms_genbench.test_progress")
    log.addHandler(handler := logging.StreamHandler(stderr))
    try:
        with progress(desc="MCD image_first chains", total=9, unit="chain") as bar:
            bar.update(1)
            say(log, logging.WARNING, "feature cache: cannot write under %s", "/ro")
            bar.update(1)
    finally:
        log.removeHandler(handler)
    lines = stderr.getvalue().split("\n")
    (message,) = [line for line in lines if "feature cache" in line]
    assert message == "feature cache: cannot write under /ro"  # nothing of a bar on its line
    assert any("chains" in line for line in lines[lines.index(message) + 1:])  # the bar goes on below


def test_a_bar_ends_its_line_when_its_loop_raises(monkeypatch):
    stderr = _log_file(monkeypatch)
    with pytest.raises(KeyboardInterrupt), progress(desc="GenCeption x", total=3, unit="doc") as bar:
        bar.update(1)
        raise KeyboardInterrupt
    stderr.write("lmms-genbench: interrupted by SIGINT; rerun the same command to resume\n")
    assert "\nlmms-genbench: interrupted" in stderr.getvalue()
