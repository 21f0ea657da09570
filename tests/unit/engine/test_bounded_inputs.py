"""Bounded inputs (issue 34): a description longer than PROMPT_CHARS is stored in full and drawn
from a cut prompt, recorded like an encoder cut; NUL, terminal escape sequences and RTL
overrides never reach a terminal raw, and the HTML report shows them escaped."""

import hashlib

from lmms_genbench.analysis.report import build_context, render
from lmms_genbench.analysis.runs import load_run
from lmms_genbench.core.errors import one_line, printable
from lmms_genbench.engine import ArtifactStore, ChainJob, ChainSpec, CycleEngine
from lmms_genbench.engine.steps import PROMPT_CHARS, PROMPT_CUT
from lmms_genbench.store import read_records, text_cut_summary
from PIL import Image

from tests.support.chains import write_run
from tests.support.fakes import FakeDescriber, FakeGenerator

NASTY = "a cat\x00 \x1b[31mred\x1b[0m \u202eevil"


class Huge(FakeDescriber):
    def describe(self, images, prompt, gen_kwargs):
        super().describe(images, prompt, gen_kwargs)
        return ["a red square " * 80_000] * len(images)  # ~1 MB


class Recording(FakeGenerator):
    def generate(self, prompts, seeds):
        self.prompts = getattr(self, "prompts", []) + list(prompts)
        return super().generate(prompts, seeds)


def test_a_1mb_description_is_stored_in_full_and_drawn_from_a_bounded_prompt(tmp_path):
    spec = ChainSpec.from_request("Describe the image.", {"iterations": 1})
    store = ArtifactStore(tmp_path)
    ns = store.namespace("d", "g", spec.protocol_id("test"))
    job = ChainJob("0", spec, store.chain(ns, "0"), lambda: [Image.new("RGB", (16, 16), (200, 0, 0))])
    generator = Recording()
    (outcome,), _ = CycleEngine(Huge(), generator).run([job])
    assert outcome.ok
    stored = job.location.read_text(1)
    assert stored == ("a red square " * 80_000).strip()  # in full
    (prompt,) = generator.prompts
    assert len(prompt) <= PROMPT_CHARS + len(spec.generate_prompt)
    assert read_records(job.location.directory)[2]["cut"][PROMPT_CUT] == [PROMPT_CHARS, len(stored) - PROMPT_CHARS]
    summary = text_cut_summary([(job.location.directory, 3)])
    assert summary[PROMPT_CUT]["truncated"] == 1


def test_control_characters_and_bidi_overrides_are_escaped_for_terminals():
    shown = printable(NASTY)
    assert shown == "a cat\\x00 \\x1b[31mred\\x1b[0m \\u202eevil"
    assert not any(c in one_line(NASTY) for c in "\x00\x1b\u202e")
    assert printable("two\nlines\tand tabs") == "two\nlines\tand tabs"


def test_a_failure_reason_with_escape_sequences_is_stored_escaped(tmp_path):
    from lmms_genbench.engine.planning import ChainState
    from lmms_genbench.engine import ChainOutcome

    spec = ChainSpec.from_request("Describe the image.", {"iterations": 1})
    state = ChainState(ChainOutcome("0", spec, ArtifactStore(tmp_path).chain(tmp_path, "0")), lambda: None)
    state.fail(1, "describe", NASTY)
    assert not any(c in state.outcome.failure.reason for c in "\x00\x1b\u202e")


def test_the_html_report_shows_them_escaped(tmp_path):
    path = write_run(tmp_path, "r1", texts=(NASTY, "a cup"))
    html = render(build_context([load_run(path)])[0])
    assert not any(c in html for c in "\x00\x1b\u202e")
    assert "\\x1b[31mred" in html and "\\u202eevil" in html
