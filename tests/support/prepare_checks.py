"""A report prepares each chain once (issue 24, item 4): count the calls to a scorer's
``prepare`` and check the report's ``failed_docs`` against preparing every record again."""


def count_calls(monkeypatch, owner, name, calls, static=False):
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(args[-2].chain_id)  # (…, record, length)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, staticmethod(counted) if static else counted)


def check_prepared_once(calls, records, written, scorer):
    assert sorted(calls) == sorted({r.chain_id for r in records}), calls
    # the list is the one preparing every record again gives
    assert written["failed_docs"] == scorer.failed_docs(records)
    assert written["failed_docs_total"] == len(scorer.failed_docs(records))
