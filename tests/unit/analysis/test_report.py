"""``lmms-genbench report`` on hand-made runs in the layout lmms-eval 0.7.3 and the store
write: what the page shows (intervals or their fallbacks, per-step similarity, failed
docs, several runs side by side), that it is self-contained and escaped, and that
hundreds of chains stay small and fast. The page in a real browser: test_report_browser."""

from __future__ import annotations

import base64
import io
import json
import re
import time
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.analysis.gallery import DocScores, Thumbnails
from lmms_genbench.analysis.report import build_context, fmt, render, write_report
from lmms_genbench.analysis.runs import load_run
from lmms_genbench.cli import main
from lmms_genbench.store import Chain

from tests.support.chains import DATE, write_run
from tests.support.chains import store_report as _report


class _Tags(HTMLParser):
    """Every start tag with its attributes, in order."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(html):
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _headline(context, task="t"):
    (found,) = [t for t in context["tasks"] if t["name"] == task]
    return {row["metric"]: row["cells"] for row in found["headline"]}


def test_fmt_keeps_counts_and_marks_what_is_missing():
    assert [fmt(None), fmt(float("nan")), fmt(3), fmt(1.0), fmt(0.123456), fmt(552.86), fmt("cats")] == \
        ["—", "—", "3", "1.0000", "0.1235", "552.9", "cats"]
    assert [fmt(9.0, "n_scored"), fmt(2.0, "gc_fid@3_n_min"), fmt(2.5, "n_x"), fmt(1.0, "gc@3")] == \
        ["9", "2", "2.5000", "1.0000"]


def test_headline_shows_the_interval_else_the_stderr_else_a_dash(tmp_path):
    context, _ = build_context([load_run(write_run(tmp_path, "r1"))])
    cells = {metric: cell for metric, (cell,) in _headline(context).items()}
    assert list(cells) == ["gc@2", "gc_fid@2", "extra"]  # steps, groups and counts left to their tables
    assert cells["gc@2"]["value"] == "0.8000" and cells["gc@2"]["interval"] == "[0.7000, 0.9000]"
    assert cells["gc@2"]["title"] == "95% interval, bootstrap, n 2, stderr 0.0500"
    assert cells["extra"]["interval"] is None and cells["extra"]["note"] == "± 0.1000"
    # an interval the scorer cannot give says why
    assert cells["gc_fid@2"]["note"] == "—" and cells["gc_fid@2"]["title"] == "FID has no per-doc estimator"


def test_todays_reports_without_intervals_or_doc_scores_still_render(tmp_path):
    context, _ = build_context([load_run(write_run(tmp_path, "r1", report=False))])
    (cell,) = _headline(context)["gc@2"]
    assert cell["interval"] is None and cell["note"] == "—"
    assert all(s.similarity is None for c in context["cards"] for s in c.steps)
    assert render(context)  # the template needs none of the new keys


def test_each_step_shows_the_similarity_the_report_lists_for_that_chain(tmp_path):
    context, _ = build_context([load_run(write_run(tmp_path, "r1"))])
    card = next(c for c in context["cards"] if c.chain_id == "a")
    # GenCeption's s@t is the t-th image: hop 2t of an image-first chain
    assert [(s.hop, s.kind, s.similarity) for s in card.steps] == [
        (0, "image", None), (1, "text", None), (2, "image", 0.9), (3, "text", None), (4, "image", 0.72)]
    assert card.score == 0.81 and card.score_name == "gc" and card.group == "cats"
    assert context["groups"] == ["cats", "dogs"]


def test_mcd_columns_map_one_step_to_one_hop_and_skip_the_other_direction():
    chain = Chain(chain_id="x#text_first", direction="text_first", length=4, hops=5, namespace="n", folder="f")
    scores = DocScores({"doc_scores": {"chain_ids": ["x#text_first"], "columns": {
        "s_text->text@2": [0.5], "s_image->image@2": [None], "s_text->image@1": [0.25], "s_image->text@1": [None]}}})
    assert [scores.similarity(chain, h) for h in range(1, 5)] == [0.25, 0.5, None, None]


def test_failed_docs_list_the_chains_stage_and_reason_and_what_the_scorer_refused(tmp_path):
    context, _ = build_context([load_run(write_run(tmp_path, "r1"))])
    (task,) = context["tasks"]
    rows = {r["chain_id"]: (r["stage"], r["hop"], r["reason"]) for r in task["failed"]["rows"]}
    assert rows == {"c": ("generate", 3, "generator refused the prompt"), "z": ("scorer", "", "seed image unreadable")}
    card = next(c for c in context["cards"] if c.chain_id == "c")
    assert card.status == "failed" and card.failure == "generate failed at hop 3: generator refused the prompt"


def test_two_runs_side_by_side_with_labels(tmp_path):
    runs = [load_run(write_run(tmp_path, "r1", gc=0.8)), load_run(write_run(tmp_path, "r2", gc=0.6))]
    context, _ = build_context(runs, labels=["model A", "model B"])
    a, b = _headline(context)["gc@2"]
    assert (a["value"], b["value"]) == ("0.8000", "0.6000")
    assert [r["label"] for r in context["runs"]] == ["model A", "model B"]
    # the same doc of both runs next to each other
    assert [(c.chain_id, c.run) for c in context["cards"]][:2] == [("a", 0), ("a", 1)]
    (table,) = context["tasks"][0]["tables"]
    assert [(r["name"], r["label"]) for r in table["rows"]][:2] == [("cats", "model A"), ("cats", "model B")]
    assert context["tasks"][0]["figures"][0]["uri"].startswith("data:image/png;base64,")  # S(t), one line per run


def test_the_page_is_self_contained_escaped_and_folds_long_texts(tmp_path):
    long = "word " * 2000
    path = write_run(tmp_path, "r1", texts=("<script>alert(1)</script>", long))
    html = render(build_context([load_run(path)])[0])
    tags = _tags(html)
    assert not [a for t, a in tags if t == "script" and "src" in a]
    assert not [a for t, a in tags if t in ("link", "img") and re.match(r"(https?:)?//", a.get("src", a.get("href", "")))]
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "6000 more characters in the stored file" in html  # 10000 characters, 4000 shown
    images = [a for t, a in tags if t == "img" and "data-thumb" in a]
    assert len(images) == 2 * 3 + 2  # chains a and b: 3 images each; c: 2 before it failed
    assert {a["data-thumb"] for a in images} == set(_thumbs(html))


HOSTILE = "cat\x1b[31m\x07\u202egnp.exe<script>alert(1)</script>"


@pytest.mark.parametrize("where", [0, 2])  # a complete chain (card), the failed one (card, failed-docs table)
def test_a_hostile_file_name_is_shown_escaped_everywhere(tmp_path, where):
    """Issue 43: an image file name (the chain's id) holding ESC, BEL, U+202E and <script>
    reaches the page nowhere raw: not in the failed-docs table, a chain card or a data-id."""
    ids = ["a", "b", "c"]
    ids[where] = HOSTILE.replace("/", "_")
    html = render(build_context([load_run(write_run(tmp_path, "r1", ids=tuple(ids)))])[0])
    assert not [ch for ch in "\x1b\x07\u202e" if ch in html]
    assert "<script>alert" not in html
    assert "cat\\x1b[31m\\x07\\u202egnp.exe&lt;script&gt;" in html  # visible escapes, HTML-escaped
    assert 'data-id="cat\\x1b[31m\\x07\\u202egnp.exe&lt;script&gt;' in html


def test_a_missing_image_is_named_not_a_broken_image(tmp_path):
    path = write_run(tmp_path, "r1")
    chain = load_run(path).tasks["t"].chains["0"]
    chain.path(2).unlink()
    context, notes = build_context([load_run(path)])
    step = next(c for c in context["cards"] if c.chain_id == "a").steps[2]
    assert step.thumb is None and "cannot read 002.png" in step.missing
    assert notes == ["1 stored hop file(s) could not be read; the gallery says which"]


def test_thumbnails_are_small_and_each_distinct_image_is_kept_once(tmp_path):
    big = Image.fromarray(np.random.default_rng(0).integers(0, 255, (600, 400, 3), dtype=np.uint8))
    for name in ("one.png", "two.png"):
        big.save(tmp_path / name)
    thumbs = Thumbnails(px=128)
    thumbs.add_all([tmp_path / "one.png", tmp_path / "two.png"])
    (key,) = thumbs.uris
    assert thumbs.get(tmp_path / "two.png") == (key, None) and thumbs.sizes[key] == (85, 128)
    (tmp_path / "bad.png").write_bytes(b"not an image")
    assert thumbs.get(tmp_path / "bad.png")[0] is None


def _many_chains(tmp_path, n):
    """``n`` image-first chains of 1 iteration with distinct 192-pixel images (upscaled
    noise, so that no two thumbnails are alike), written straight to the store layout."""
    rng = np.random.default_rng(0)
    chains = []
    for i in range(n):
        chain = Chain(chain_id=f"doc{i}", direction="image_first", length=2, hops=3,
                      namespace=str(tmp_path / "store"), folder=f"doc{i}")
        chain.location.directory.mkdir(parents=True)
        for hop in range(3):
            if chain.kind(hop) == "image":
                noise = Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
                noise.resize((192, 192), Image.Resampling.BICUBIC).save(chain.path(hop), compress_level=1)
            else:
                chain.path(hop).write_text(f"description {hop} of doc {i} " * 30)
        chains.append(chain)
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{DATE}_results.json").write_text(json.dumps(
        {"results": {"t": {"gc@1,none": 0.5, "n_scored,none": n, "n_failed,none": 0}}, "config": {"model": "cycle"}}))
    with open(out / f"{DATE}_samples_t.jsonl", "w") as fh:
        for i, chain in enumerate(chains):
            fh.write(json.dumps({"doc_id": i, "filtered_resps": [chain.to_json()]}) + "\n")
    return out


def _thumbs(html):
    return json.loads(re.search(r'<script id="thumbs" type="application/json">(.*?)</script>', html, re.DOTALL).group(1))


def test_three_hundred_chains_render_quickly_into_a_small_page(tmp_path):
    out = _many_chains(tmp_path, 300)
    started = time.perf_counter()
    result = write_report([out], tmp_path / "report.html")
    seconds = time.perf_counter() - started
    assert result.chains == 300 and result.images == 600
    html = result.path.read_text()
    thumbs = _thumbs(html)
    assert len(thumbs) == 600
    sizes = {Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).size for uri in list(thumbs.values())[:50]}
    assert sizes == {(128, 128)}  # downscaled from 192
    # measured on a busy 2-core machine: about 6 s and 1.7 MB (600 thumbnails of about 2.8 KB)
    assert seconds < 30, seconds
    assert result.bytes < 4e6, result.bytes
    # only the first page is shown before the script pages the rest
    assert html.count("<article") == 300 and html.count(" hidden>") == 280


def test_cli_writes_the_page_and_names_an_unreadable_file(tmp_path, capsys):
    path = write_run(tmp_path, "r1")
    bad = tmp_path / f"bad{DATE}_results.json"
    bad.write_text("{")
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "r.html")
    assert main(["report", str(bad), str(path), "-o", str(tmp_path / "r2.html")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"lmms-genbench report: error: {bad}: not JSON")
    assert (tmp_path / "r2.html").is_file()  # the readable run is still shown
    assert main(["report", str(path), "-o", str(tmp_path / "r3.html"), "--label", "a", "b"]) == 2
    assert "give one per file" in capsys.readouterr().err
    assert main(["report", str(path), "-o", str(tmp_path / "r4.html"), "--thumb", "0"]) == 2


def test_the_gallery_pages_and_filters_in_a_real_browser(tmp_path):
    from tests.support.browser import chromium_or_skip, open_report, shown_gallery_images, status

    chromium_or_skip()
    paths = [write_run(tmp_path, "r1", gc=0.8), write_run(tmp_path, "r2", gc=0.6)]
    result = write_report(paths, tmp_path / "report.html", labels=["model A", "model B"], page_size=2)
    with open_report(result.path) as (page, problems):
        assert status(page) == "chains 1–2 of 6 (page 1 of 3)"
        first = shown_gallery_images(page)
        assert [i["alt"] for i in first] == [f"a hop {h}" for h in (0, 2, 4)] * 2  # doc a of both models
        page.click("#next")
        page.click("#next")
        assert status(page) == "chains 5–6 of 6 (page 3 of 3)"
        assert len(shown_gallery_images(page)) == 2 * 2  # chain c failed after its second image
        page.select_option("#f-status", "failed")
        page.select_option("#f-run", "1")
        assert status(page) == "chains 1–1 of 1 (page 1 of 1)"
        assert "generator refused the prompt" in page.locator("#cards .card:not([hidden])").inner_text()
        page.select_option("#f-status", "")
        page.select_option("#f-sort", "asc")  # by gc: doc b (0.79) before doc a (0.81)
        assert page.locator("#cards .card:not([hidden]) code").all_inner_texts() == ["b", "a"]
        page.select_option("#f-size", "all")
        page.fill("#f-q", "c")
        assert status(page) == "chains 1–1 of 1 (page 1 of 1)"
        shown = shown_gallery_images(page)
        assert problems == []
    assert all(i["width"] > 0 for i in first + shown)


def test_the_report_file_gets_the_umask_permissions(tmp_path):
    """atomic_write gives the file what open() would (0666 less the umask): no chmod after
    the rename, which would reopen a window where the report is private."""
    import os
    import stat

    from lmms_genbench.core.keys import atomic_write

    old = os.umask(0o027)
    try:
        target = tmp_path / "r.html"
        atomic_write(target, lambda fh: fh.write(b"x"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_the_text_budget_of_the_store_report_is_a_table_of_the_page(tmp_path):
    report = {**_report(), "text_budget": {
        "text_encoder:CLIPTextModel": {"tokens_read": 77, "descriptions": 4, "truncated": 3,
                                       "share_truncated": 0.75, "mean_tokens_cut": 120.5,
                                       "mean_tokens_cut_when_truncated": 160.67},
        "text_encoder_2:T5EncoderModel": {"tokens_read": 512, "descriptions": 4, "truncated": 0,
                                          "share_truncated": 0.0, "mean_tokens_cut": 0.0,
                                          "mean_tokens_cut_when_truncated": 0.0}}}
    context, _ = build_context([load_run(write_run(tmp_path, "r1", report=report))])
    (table,) = [t for t in context["tasks"][0]["tables"] if t["title"].startswith("text budget")]
    assert table["columns"][:4] == ["tokens_read", "descriptions", "truncated", "share_truncated"]
    clip = next(r for r in table["rows"] if r["name"] == "text_encoder:CLIPTextModel")
    assert clip["cells"][:5] == ["77", "4", "3", "0.7500", "120.5"]
    html = render(context)
    assert "text budget: per text encoder" in html and "text_encoder_2:T5EncoderModel" in html
