"""AutoBench-V pure parts and the build pipeline on a scripted examiner and a
fake generator (no model, no torch): graph exclusion, exact balancing, answer
extraction, self-validation thresholds, parsing, retries/drops, resume."""

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from lmms_eval.utils import load_yaml_config

from lmms_genbench.autobench import parse
from lmms_genbench.autobench import prompts as P
from lmms_genbench.autobench.balance import balanced_letters, letter_counts, move_answer
from lmms_genbench.autobench.build import (
    BuildConfig,
    Builder,
    build_benchmark,
    default_build_cost,
    passes,
    validation_outcome,
)
from lmms_genbench.autobench.cache import CallCache
from lmms_genbench.autobench.graph import SemanticGraph
from lmms_genbench.metrics.functional.autobench import (
    EXTRACTION_RULES,
    AccuracyStats,
    accuracy_interval,
    deviation_rate,
    extract_choice,
    extract_choice_by_rule,
    score_record,
)

from tests.support.autobench_fakes import FakeGenerator, ScriptedExaminer

TASKS = Path(__file__).resolve().parents[3] / "lmms_genbench" / "tasks" / "autobench"

# ---------------------------------------------------------------- graph


def test_graph_keeps_listed_words_by_default_as_the_authors():
    g = SemanticGraph()
    assert g.add_round("Beach", ["sand", "Sun", "sea", "beach"]) == ["beach"]
    assert g.degree("sand") == 1 and g.degree("beach") == 3
    # round 2: beach 3, forest 3, then the first-seen degree-1 words; f(2) = 2 -> beach, forest
    assert g.add_round("forest", ["tree", "sun", "moss"]) == ["forest"]
    assert g.avoid_words == ["beach", "forest"]
    # round 3: beach gains shell (and sun, tree again): beach 4, forest 3, sun 2 -> 3 words
    assert g.add_round("beach", ["sun", "shell", "tree"]) == ["sun"]
    assert g.avoid_words == ["beach", "forest", "sun"]


def test_graph_withholds_top_degree_words_and_the_list_only_grows():
    g = SemanticGraph(withhold=True)
    # round 1: beach-{sand, sun, sea}: beach has degree 3, f(1) = 1 word withheld
    assert g.add_round("Beach", ["sand", "Sun", "sea", "beach"]) == ["beach"]
    assert g.degree("sand") == 0 and g.degree("sun") == 0
    # round 2: forest-{tree, sun, moss}: forest 3, then a tie at degree 1 among
    # sun, tree, moss broken by first-seen order -> sun; f(2) = 2
    assert g.add_round("forest", ["tree", "sun", "moss"]) == ["forest", "sun"]
    assert g.avoid_words == ["beach", "forest", "sun"]
    # round 3: withheld words are not re-added (so shell gets no edge); every
    # remaining node has degree 0 and f(3) = 3 go in first-seen order
    out = g.add_round("beach", ["sun", "shell", "tree"])
    assert "beach" not in g.edges and "sun" not in g.edges and g.degree("shell") == 0
    assert out == ["sand", "sea", "tree"]
    assert g.avoid_words[:3] == ["beach", "forest", "sun"] and len(g.avoid_words) == 6


def test_graph_exclusion_count_is_configurable_and_capped():
    g = SemanticGraph(exclude_count=lambda e: 0)
    g.add_round("a", ["b", "c"])
    assert g.avoid_words == [] and g.degree("a") == 2
    g = SemanticGraph(exclude_count=lambda e: 100)
    assert sorted(g.add_round("a", ["b"])) == ["a", "b"]


# ---------------------------------------------------------------- balance


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 10, 13, 720])
def test_letters_are_balanced_exactly(n):
    seq = balanced_letters(n, seed=3)
    counts = letter_counts(seq)
    assert sum(counts.values()) == n
    assert all(abs(c - n / 4) < 1 for c in counts.values())
    assert max(counts.values()) - min(counts.values()) <= 1
    assert balanced_letters(n, seed=3) == seq  # seeded


@pytest.mark.parametrize("sizes", [(3, 5, 6), (1, 1, 1, 1, 1), (7,), (0, 4, 9)])
def test_letters_are_balanced_within_groups_and_overall(sizes):
    groups = [g for g, k in enumerate(sizes) for _ in range(k)]
    groups = groups[1::2] + groups[0::2]  # interleaved: groups need not be contiguous
    seq = balanced_letters(len(groups), seed=5, groups=groups)
    for members in [range(len(groups))] + [[i for i, g in enumerate(groups) if g == k] for k in set(groups)]:
        counts = letter_counts([seq[i] for i in members])
        assert max(counts.values()) - min(counts.values()) <= 1, (sizes, counts)
    with pytest.raises(ValueError, match="groups"):
        balanced_letters(3, 0, groups=[0, 1])


def test_letter_order_depends_on_seed_and_move_answer_keeps_options():
    assert balanced_letters(40, 0) != balanced_letters(40, 1)
    opts, ans = move_answer(["w", "x", "y", "z"], "B", "D")
    assert ans == "D" and opts == ["w", "z", "y", "x"] and opts[3] == "x"
    assert move_answer(["w", "x", "y", "z"], "C", "C") == (["w", "x", "y", "z"], "C")


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize("text,letter", [
    ("[[B]]", "B"), ("[[ b ]]", "B"), ("The answer is [[C]]. The cat is left.", "C"),
    ("[[D. under the ball]] because", "D"), ("B", "B"), ("  (a) ", "A"), ("d.", "D"),
    ("[C] since", "C"), ("A. left of the ball", "A"), ("Answer: D", "D"),
    ("I think the answer is B", "B"),
    ("[[A]] or maybe [[B]]", None), ("[[E]]", None), ("", None), (None, None),
    ("a cube near a ball", None), ("It is unclear", None),
])
def test_extract_choice(text, letter):
    assert extract_choice(text) == letter


@pytest.mark.parametrize("text,letter,rule", [
    ("[[B]]", "B", "strict"), ("The answer is [[C]]. The cat is left.", "C", "strict"),
    ("[[A]] ... so [[ a ]]", "A", "strict"),  # the authors' exact match reads A too
    ("[[ b ]]", "B", "bracket_variant"), ("[[D. under the ball]] because", "D", "bracket_variant"),
    ("[[c]]", "C", "bracket_variant"), ("[C] since", "C", "single_bracket"),
    ("B", "B", "bare_letter"), ("  (a) ", "A", "bare_letter"), ("d.", "D", "bare_letter"),
    ("A. left of the ball", "A", "option_label"), ("Answer: D", "D", "answer_is"),
    ("I think the answer is B", "B", "answer_is"),
    ("[[A]] or maybe [[B]]", None, None), ("", None, None), (None, None, None), ("It is unclear", None, None),
])
def test_extract_choice_names_the_rule_that_read_the_answer(text, letter, rule):
    assert extract_choice_by_rule(text) == (letter, rule)
    assert extract_choice(text) == letter
    assert rule is None or rule in EXTRACTION_RULES


def test_accuracy_stats_count_answers_per_extraction_rule():
    recs = [score_record("[[A]]", "A", "easy", "x", "cap"), score_record("[[ a ]]", "A", "easy", "x", "cap"),
            score_record("[[B]]", "A", "hard", "x", "cap"), score_record("Answer: C", "C", "hard", "y", "cap"),
            score_record("blah", "C", "hard", "y", "cap")]
    assert [r["rule"] for r in recs] == ["strict", "bracket_variant", "strict", "answer_is", ""]
    s = AccuracyStats.of(recs)
    assert s.by_rule == {"strict": 2, "bracket_variant": 1, "single_bracket": 0, "bare_letter": 0,
                         "option_label": 0, "answer_is": 1}
    assert sum(s.by_rule.values()) + s.unparsed == s.n
    assert s.acc() == pytest.approx(3 / 5) and s.acc_strict() == pytest.approx(1 / 5)
    merged = AccuracyStats.of(recs[:2]).merge(AccuracyStats.of(recs[2:]))
    assert merged.by_rule == s.by_rule and merged.acc_strict() == s.acc_strict()
    assert math.isnan(AccuracyStats().acc_strict())
    with pytest.raises(ValueError, match="record rule must be one of"):
        AccuracyStats().add({**recs[0], "rule": "lenient"})


def test_accuracy_stats_count_unparsed_as_wrong_and_merge():
    recs = [score_record("[[A]]", "A", "easy", "x", "cap"), score_record("[[B]]", "A", "hard", "x", "cap"),
            score_record("blah", "C", "hard", "y", "cap"), score_record("C", "C", "hard", "y", "cap")]
    s = AccuracyStats.of(recs)
    assert s.acc() == 0.5 and s.unparsed == 1
    assert s.acc("level:easy") == 1.0 and s.acc("level:hard") == pytest.approx(1 / 3)
    assert math.isnan(s.acc("level:medium"))
    b = s.breakdown()
    assert b["acc_aspect:x"] == 0.5 and b["n_aspect:y"] == 2 and b["acc_capability:cap"] == 0.5
    merged = AccuracyStats.of(recs[:2]).merge(AccuracyStats.of(recs[2:]))
    assert merged.breakdown() == b and merged.unparsed == 1 and merged.pred_letters == s.pred_letters
    assert deviation_rate(0.6, 0.75) == pytest.approx(-0.2)


def test_accuracy_gets_a_bootstrap_stderr_and_a_level_without_docs_is_none():
    from lmms_genbench.tasks.autobench import utils

    # 30 easy docs, 15 right; 10 hard docs, all right; no medium doc
    recs = [score_record("[[A]]" if i % 2 else "[[B]]", "A", "easy", "x", "cap") for i in range(30)]
    recs += [score_record("[[A]]", "A", "hard", "x", "cap") for _ in range(10)]
    hard = accuracy_interval(recs, "hard")
    assert hard["low"] == hard["high"] == pytest.approx(1.0) and hard["stderr"] == pytest.approx(0.0, abs=1e-12)
    easy = accuracy_interval(recs, "easy")
    assert easy["stderr"] == pytest.approx(math.sqrt(0.25 / 30), rel=0.1) and easy["low"] < 0.5 < easy["high"]
    assert accuracy_interval(recs)["value"] == pytest.approx(25 / 40)
    items = lambda m: [(m, r) for r in recs]  # noqa: E731
    assert utils.aggregate(items("acc_easy_stderr")) == easy["stderr"]
    assert utils.aggregate(items("acc_medium")) is None and utils.aggregate(items("acc_medium_stderr")) is None
    assert utils.METRICS.index("acc_stderr") == utils.METRICS.index("acc") + 1


# ---------------------------------------------------------------- self-validation


def test_self_validation_thresholds():
    qs = [f"q{i}" for i in range(5)]
    # 5/5: accepted at any ζ, nothing recorded
    assert validation_outcome([True] * 5, qs, 1.0) == (1.0, True, [])
    # 4/5 = 0.8: below ζ_easy = 1 -> redraw; at ζ_medium = 0.8 -> kept, failed element recorded
    score, ok, defects = validation_outcome([True, True, False, True, True], qs, 1.0)
    assert score == pytest.approx(0.8) and not ok and defects == ["q2"]
    assert validation_outcome([True, True, False, True, True], qs, 0.8)[1:] == (True, ["q2"])
    # 7/10 < 0.8 -> redraw; 0.1+0.7 style rounding still passes at 0.8
    assert not validation_outcome([True] * 7 + [False] * 3, list(range(10)), 0.8)[1]
    assert passes(0.1 + 0.7, 0.8) and not passes(0.79, 0.8)
    assert validation_outcome([], [], 0.0) == (0.0, True, [])


# ---------------------------------------------------------------- parsing


QA = {"question": "Where?", "options": {"A": "left", "B": "right", "C": "up", "D": "down"},
      "reference_answer": "B"}


def _qa(**change):
    return json.dumps({**QA, **change})


def test_parse_qa_accepts_fences_prose_and_answer_text():
    q = parse.parse_qa("Sure!\n```json\n" + _qa() + "\n```")
    assert q.answer == "B" and q.options == ("left", "right", "up", "down")
    assert parse.parse_qa(_qa(reference_answer="down")).answer == "D"
    assert parse.parse_qa(_qa(reference_answer="C. up")).answer == "C"


@pytest.mark.parametrize("text,reason", [
    ("no json here", "no_json"),
    ('{"question": "Where?", "options": {"A": ', "broken_json"),
    (_qa(question=""), "missing_field"),
    (_qa(options={"A": "x", "B": "y"}), "wrong_option_count"),
    (_qa(options={"A": "x", "B": "Y.", "C": "y", "D": "z"}), "duplicate_options"),
    (_qa(reference_answer="E"), "answer_not_in_options"),
    (_qa(reference_answer="sideways"), "answer_not_in_options"),
    (_qa(reference_answer=""), "missing_field"),
])
def test_parse_qa_failures_have_typed_reasons(text, reason):
    with pytest.raises(parse.ParseError) as err:
        parse.parse_qa(text)
    assert err.value.reason == reason


def test_parse_other_stages():
    text = ("General Aspect: Depth\nFined-grained Aspect: Occlusion\nIntroduction: what hides what\n"
            "Fined-grained Aspect: Distance\nIntroduction: near and far\n"
            "**General Aspect:** Layout\nFine-grained Aspect: Left-right\nIntroduction: sides\n")
    with pytest.raises(parse.ParseError, match="too_few_aspects"):
        parse.parse_aspects(text, 2, 2)
    got = parse.parse_aspects(text, 1, 2)
    assert [(a.general, a.name) for a in got] == [("Depth", "Occlusion"), ("Depth", "Distance")]
    assert parse.parse_guideline("Aspect: a\nIntroduction: b\nGuidance: Put the cup\nbefore the jar.") == \
        "Put the cup before the jar."
    d = parse.parse_description(
        "Aspect: a\nPrompt: A red cup on a table.\nTopic word: kitchen\nKey word: [cup, table, red]")
    assert d.prompt == "A red cup on a table." and d.topic == "kitchen" and d.keywords == ("cup", "table", "red")
    with pytest.raises(parse.ParseError, match="no_description"):
        parse.parse_description("random words")
    assert parse.parse_validation_questions('{"questions": ["a?", "a?", "b?", "c?"]}', 2) == ["a?", "b?"]
    assert parse.parse_yes_no("Yes, there is.") and not parse.parse_yes_no("no")
    with pytest.raises(parse.ParseError, match="unclear_yes_no"):
        parse.parse_yes_no("maybe")


def test_capability_definition():
    assert P.capability_definition("spatial")[0] == "spatial understanding"
    assert P.capability_definition("Counting", "how many")[1] == "how many"
    with pytest.raises(ValueError, match="definition"):
        P.capability_definition("Counting")
    with pytest.raises(ValueError, match="levels"):
        BuildConfig(levels=("easy", "extreme"))
    with pytest.raises(ValueError, match="thresholds"):
        BuildConfig(thresholds={"easy": 1.5, "medium": 0.8, "hard": 0.8})


# ---------------------------------------------------------------- pipeline


def _cfg(**kw):
    base = {"capability": "spatial", "n_general": 1, "m_fine": 2, "per_level": 3, "levels": ("easy", "medium"),
                "max_redraws": 1, "max_retries": 1, "n_validation_questions": 5, "seed": 0}
    return BuildConfig(**{**base, **kw})


def _run(tmp_path, examiner, gen=None, **kw):
    gen = gen or FakeGenerator()
    return Builder(_cfg(**kw), examiner, gen, CallCache(tmp_path / "cache")).run(), gen


def test_build_balances_letters_and_asks_qa_without_image(tmp_path):
    ex = ScriptedExaminer(bad_qa_first=True, deny="table")
    result, gen = _run(tmp_path, ex)
    # 4/5 yes: easy (ζ=1) is redrawn then dropped; medium (ζ=0.8) kept with the defect recorded
    assert Counter(i.level for i in result.items) == {"medium": 6}
    assert result.dropped_by_reason == {"validation:below_threshold": 6}
    assert all(i.defects == ["Is there a table?"] and i.alignment_score == pytest.approx(0.8)
               for i in result.items)
    for level in ("easy", "medium", ""):
        counts = letter_counts([i.answer for i in result.items if level in i.level])
        assert max(counts.values()) - min(counts.values()) <= 1
    for it in result.items:  # the correct option moved with its letter
        assert it.options["ABCD".index(it.answer)] == "left of the ball"
    # error control: every Q&A prompt names the defect and carries no image
    qa = [(p, n) for p, n in zip(ex.prompts, ex.n_images) if '"reference_answer"' in p]
    assert qa and all(n == 0 for _, n in qa)
    assert all("Is there a table?" in p for p, _ in qa)
    # a broken first Q&A is retried once with a note, then succeeds
    assert sum("[Note]" in p for p, _ in qa) == 6
    # images: easy items drew 1 + max_redraws = 2, medium items 1
    assert gen.calls == 6 * 2 + 6 * 1
    m = result.manifest
    assert m["n_items"] == 6 and m["n_planned"] == 12 and m["cost_this_run"]["images_drawn"] == 18


def test_build_avoid_list_is_per_level_by_default_and_shared_on_request(tmp_path):
    result, _ = _run(tmp_path / "a", ScriptedExaminer())
    graphs = result.manifest["semantic_graphs"]
    assert result.manifest["config"]["avoid_list"] == "per_level"
    for per_aspect in graphs.values():  # a fresh graph per level, listed words kept in it
        assert set(per_aspect) == {"easy", "medium"}
        assert all(g["rounds"] == 3 and not g["withhold"] and len(g["excluded"]) <= 3 for g in per_aspect.values())
    result, _ = _run(tmp_path / "b", ScriptedExaminer(), avoid_list="shared_withheld")
    shared = next(iter(result.manifest["semantic_graphs"].values()))
    assert shared["rounds"] == 6 and shared["withhold"]
    with pytest.raises(ValueError, match="avoid_list"):
        _cfg(avoid_list="none")


def test_build_drops_and_counts_malformed_and_failed_items(tmp_path):
    result, _ = _run(tmp_path / "a", ScriptedExaminer(duplicate_options=True))
    assert result.items == [] and result.dropped_by_reason == {"qa:duplicate_options": 12}
    result, gen = _run(tmp_path / "b", ScriptedExaminer(), gen=FakeGenerator(fail=True))
    assert result.dropped_by_reason == {"draw:generation_failure": 12} and gen.calls == 24
    # nothing survived: the manifest says why, the task refuses the folder with that hint
    from lmms_genbench.autobench.dataset import load

    build_benchmark(_cfg(), ScriptedExaminer(duplicate_options=True), FakeGenerator(), tmp_path / "c")
    man = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert man["n_items"] == 0 and man["dropped_by_reason"] == {"qa:duplicate_options": 12}
    assert len(man["dropped"]) == 12 and man["dropped"][0]["stage"] == "qa"
    with pytest.raises(FileNotFoundError, match="every item was dropped"):
        load(str(tmp_path / "c"))


def test_semantic_graph_feeds_the_next_description_prompt(tmp_path):
    ex = ScriptedExaminer()
    result, _ = _run(tmp_path, ex, levels=("easy",))
    desc = [p for p in ex.prompts if "Topic word:" in p]
    assert "Avoid using the following words in your new description: none" in desc[0]
    # round 1 withheld the topic (degree 4): it is avoided from round 2 on
    assert "in your new description: toys1\n" in desc[1]
    assert len(result.items) == 6


def test_interrupted_build_resumes_without_repeating_a_call(tmp_path):
    full, gen_full = _run(tmp_path / "full", ScriptedExaminer())
    total = full.manifest["cost_this_run"]["examiner_calls"]
    cache = CallCache(tmp_path / "cache")
    ex1, gen1 = ScriptedExaminer(fail_after=total // 2), FakeGenerator()
    with pytest.raises(RuntimeError, match="interrupted"):
        Builder(_cfg(), ex1, gen1, cache).run()
    assert len(ex1.prompts) == total // 2
    ex2, gen2 = ScriptedExaminer(), FakeGenerator()
    # the scripted examiner numbers its descriptions: start where run 1 stopped
    ex2.n_desc = ex1.n_desc
    resumed = build_benchmark(_cfg(), ex2, gen2, tmp_path / "out", cache_dir=tmp_path / "cache")
    assert len(ex1.prompts) + len(ex2.prompts) == total
    assert gen1.calls + gen2.calls == gen_full.calls
    assert resumed.manifest["cost_this_run"]["examiner_calls"] == total - total // 2
    assert [(i.question, i.answer, i.options) for i in resumed.items] == \
        [(i.question, i.answer, i.options) for i in full.items]
    # a third run is served from the cache entirely
    ex3 = ScriptedExaminer()
    again = build_benchmark(_cfg(), ex3, FakeGenerator(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert ex3.prompts == [] and again.manifest["cost_this_run"]["images_drawn"] == 0


def test_dataset_round_trip_and_manifest(tmp_path):
    from lmms_genbench.autobench.dataset import load

    result = build_benchmark(_cfg(), ScriptedExaminer(), FakeGenerator(), tmp_path / "out")
    ds = load(str(tmp_path / "out"))
    assert len(ds) == 12 and set(ds["level"]) == {"easy", "medium"}
    row = ds[0]
    assert row["image"].size == (16, 16) and len(row["options"]) == 4 and row["answer"] in "ABCD"
    assert row["capability"] == "spatial understanding" and row["description"]
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert man["config"]["thresholds"] == {"easy": 1.0, "medium": 0.8, "hard": 0.8}
    assert man["examiner"] == "scripted-examiner" and man["generator"] == "fake-gen"
    assert man["n_items"] == len(result.items) == 12
    with pytest.raises(FileNotFoundError):
        load(str(tmp_path / "missing"))


def test_default_build_cost_matches_the_paper_size():
    cost = default_build_cost()
    assert cost["items"] == 720 and cost["images"] == 720
    # 1 aspect list + 24 guidelines + 720 × (description + checks + 6 answers + Q&A)
    assert cost["examiner_calls"] == 1 + 24 + 720 * 9 == 6505


def test_task_hooks_need_the_dataset_variable_and_move_answers(tmp_path, monkeypatch):
    from lmms_genbench.tasks.autobench import utils

    monkeypatch.delenv("AUTOBENCH_DATASET", raising=False)
    with pytest.raises(ValueError, match="AUTOBENCH_DATASET"):
        utils.load_docs(None)
    build_benchmark(_cfg(), ScriptedExaminer(), FakeGenerator(), tmp_path / "out")
    monkeypatch.setenv("AUTOBENCH_DATASET", str(tmp_path / "out"))
    docs = utils.load_docs(None)
    moved = utils.load_docs_pos_d(None)
    assert set(moved["answer"]) == {"D"} and len(moved) == len(docs) == 12
    for d, m in zip(docs, moved):
        assert m["options"][3] == d["options"]["ABCD".index(d["answer"])]
    text = utils.doc_to_text(docs[0])
    assert "Where is the cube?" in text and "\nA. " in text and "[[A]]" in text
    assert utils.doc_to_visual_none(docs[0]) == [] and utils.doc_to_visual(docs[0])[0].mode == "RGB"
    assert "A red cube" in utils.doc_to_text_noimage(docs[0])
    rec = utils.process_results(docs[0], [f"[[{docs[0]['answer']}]]"])
    assert set(rec) == {m["metric"] for m in load_yaml_config(str(TASKS / "_autobench_base.yaml"), mode="simple")["metric_list"]}
    assert utils.aggregate([rec["acc"]]) == 1.0 and utils.aggregate([rec["n_unparsed"]]) == 0
    assert utils.aggregate([rec["n_rule_strict"]]) == 1 and utils.aggregate([rec["acc_strict"]]) == 1.0
    loose = utils.process_results(docs[0], [f"Answer: {docs[0]['answer']}"])
    assert utils.aggregate([loose["n_rule_answer_is"]]) == 1 and utils.aggregate([loose["n_rule_strict"]]) == 0
    assert utils.aggregate([loose["acc"]]) == 1.0 and utils.aggregate([loose["acc_strict"]]) == 0.0


def test_cli_build_writes_dataset_and_manifest(tmp_path, monkeypatch, capsys):
    from lmms_genbench import cli
    from lmms_genbench.autobench import examiner as ex_mod
    from lmms_genbench.generators import registry

    seen = {}

    def fake_examiner(model, args, text_only="none"):
        seen["examiner"] = (model, args, text_only)
        return ScriptedExaminer()

    monkeypatch.setattr(ex_mod, "build_examiner", fake_examiner)
    monkeypatch.setattr(registry, "build_generator", lambda name, **kw: FakeGenerator())
    monkeypatch.setattr("lmms_genbench.generators.build_generator", lambda name, **kw: FakeGenerator())
    out = tmp_path / "bench"
    argv = ["autobench", "build", "--capability", "Counting", "--definition", "How many objects there are.",
            "--examiner", "openai", "--examiner-args", "model_version=gpt-4o,api_key=SECRET",
            "--generator", "smoke", "--n-general", "1", "--m-fine", "1", "--per-level", "2",
            "--levels", "easy", "hard", "--thresholds", "hard=0.5", "--max-redraws", "0", "--out", str(out)]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["items"] == report["planned"] == 4 and report["answer_letters"] == dict.fromkeys("ABCD", 1)
    assert seen["examiner"] == ("openai", {"model_version": "gpt-4o", "api_key": "SECRET"}, "none")
    man = json.loads((out / "manifest.json").read_text())
    assert man["config"]["thresholds"] == {"easy": 1.0, "medium": 0.8, "hard": 0.5}
    assert man["capability"] == {"name": "Counting", "definition": "How many objects there are."}
    assert man["examiner_spec"] == {"model": "openai", "args": {"model_version": "gpt-4o"}, "text_only": "none"}
    assert "SECRET" not in (out / "manifest.json").read_text()
    assert (out / "dataset" / "state.json").is_file()
    # bad usage is an exit code with the argument named
    assert cli.main([*argv[:-2], "--out", str(out), "--capability", "Counting", "--definition", ""]) == 2
    assert "definition" in capsys.readouterr().err


def test_cli_cost_and_bias(tmp_path, capsys):
    from lmms_genbench import cli

    assert cli.main(["autobench", "cost", "--per-level", "1", "--levels", "easy"]) == 0
    assert json.loads(capsys.readouterr().out)["examiner_calls"] == 1 + 24 + 24 * 9
    res = {"results": {
        "autobench": {"acc,none": 0.8, "acc_easy,none": 1.0, "acc_medium,none": 0.8, "acc_hard,none": 0.6},
        "autobench_posA": {"acc,none": 0.6, "acc_easy,none": 1.0, "acc_medium,none": 0.4, "acc_hard,none": 0.3}}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(res))
    assert cli.main(["autobench", "bias", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["R_A"]["acc"] == pytest.approx(-0.25) and out["R_A"]["acc_hard"] == pytest.approx(-0.5)
    assert "R_D" not in out
    path.write_text(json.dumps({"results": {"autobench": res["results"]["autobench"]}}))
    assert cli.main(["autobench", "bias", str(path)]) == 2


def test_cli_build_picks_the_device_that_exists(tmp_path, monkeypatch, capsys):
    """lmms-eval's llava_hf and the diffusers backend default to cuda: on a machine without
    one the build fills in cpu, unless device= (or device_map=) is given."""
    import torch

    from lmms_genbench import cli
    from lmms_genbench.autobench import examiner as ex_mod

    seen = {}

    def fake_examiner(model, args, text_only="none"):
        seen["examiner"] = args
        return ScriptedExaminer()

    def fake_generator(name, **kwargs):
        seen["generator"] = kwargs
        return FakeGenerator()

    monkeypatch.setattr(ex_mod, "build_examiner", fake_examiner)
    monkeypatch.setattr("lmms_genbench.generators.build_generator", fake_generator)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    base = ["autobench", "build", "--capability", "Counting", "--definition", "How many objects there are.",
            "--n-general", "1", "--m-fine", "1", "--per-level", "1", "--levels", "easy", "--max-redraws", "0"]
    argv = [*base, "--examiner", "llava_hf", "--examiner-args", "pretrained=/models/llava",
            "--generator", "diffusers", "--generator-args", "pretrained=/models/sd", "--out", str(tmp_path / "a")]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert seen == {"examiner": {"pretrained": "/models/llava", "device": "cpu", "device_map": "cpu"},
                    "generator": {"pretrained": "/models/sd", "device": "cpu"}}
    argv = [*base, "--examiner", "llava_hf", "--examiner-args", "pretrained=/models/llava,device_map=auto",
            "--generator", "diffusers", "--generator-args", "pretrained=/models/sd,device=cuda:1", "--out", str(tmp_path / "b")]
    assert cli.main(argv) == 0
    assert seen == {"examiner": {"pretrained": "/models/llava", "device_map": "auto"},
                    "generator": {"pretrained": "/models/sd", "device": "cuda:1"}}


def test_cli_bias_reads_results_through_the_one_reader(tmp_path, capsys):
    """A level the run has no number for (no hard doc, "N/A"), another filter than ``none``
    and a missing file: no KeyError, a null rate, one line naming the file."""
    from lmms_genbench import cli

    res = {"results": {
        "autobench": {"acc,strict": 0.8, "acc_easy,strict": 1.0, "acc_medium,strict": 0.5},
        "autobench_posD": {"acc,strict": 0.4, "acc_easy,strict": 0.5, "acc_medium,strict": "N/A"}}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(res))
    assert cli.main(["autobench", "bias", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["R_D"] == {"acc": pytest.approx(-0.5), "acc_easy": pytest.approx(-0.5),
                          "acc_medium": None, "acc_hard": None}
    assert cli.main(["autobench", "bias", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err
