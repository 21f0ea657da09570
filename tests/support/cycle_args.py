"""Wrong ``--model cycle`` arguments and what the one-line error must say about each: checked
in-process (tests/unit/models/test_startup_errors.py) and through the lmms-eval command
(tests/e2e/test_startup_errors_e2e.py)."""

CYCLE_ARGS = [
    ("foo=1", ["unknown model_args foo=1", "allowed: describer, generator, unified, preset", "describer.foo=..."]),
    ("describer_batch=abc", ["describer_batch must be an integer >= 1, got 'abc'", "Fix: give describer_batch="]),
    ("stop_after_hop=x", ["stop_after_hop must be an integer >= 0, got 'x'", "Fix: give stop_after_hop="]),
    ("preset=nope", ["preset must be one of ['smoke', 'smoke_unified'], got 'nope'", "Fix: give preset=smoke or"]),
]
