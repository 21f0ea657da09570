"""Build an AutoBench-V benchmark (paper 002, §3): aspects -> guidelines ->
graded descriptions (semantic-graph exclusion) -> drawing with self-validation
-> Q&A from the description and defects only -> exact letter balancing.

Every examiner and generator call goes through :class:`CallCache`, so a build
interrupted at any point and run again with the same settings repeats no
finished call. Malformed outputs are retried ``max_retries`` times with a note
naming the problem; then the item is dropped and counted under
``<stage>:<reason>``.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from PIL import Image

from ..core.keys import stable_hash
from ..core.failures import GenerationFailure
from ..generators.base import Generator
from . import prompts as P
from .balance import balanced_letters, letter_counts, move_answer
from .cache import CallCache
from .examiner import CachedExaminer, Examiner
from .graph import SemanticGraph
from .parse import (
    YES_NO_READERS,
    Aspect,
    ParseError,
    parse_aspects,
    parse_description,
    parse_guideline,
    parse_qa,
    parse_validation_questions,
    parse_yes_no,
)

logger = logging.getLogger(__name__)

#: paper §4.1: ζ_easy = 1.0, ζ_medium = ζ_hard = 0.8
PAPER_THRESHOLDS = {"easy": 1.0, "medium": 0.8, "hard": 0.8}
#: the authors' code prefixes every drawing prompt with this (REFERENCE_NOTES)
DRAW_PREFIX = "please generate a picture from the perspective of an observer: "


#: how the description prompts' avoid list grows (BuildConfig.avoid_list)
AVOID_LISTS = ("per_level", "shared_withheld")


class BuildError(RuntimeError):
    """The build cannot produce any item (e.g. no usable aspect list)."""


@dataclass
class BuildConfig:
    """Every setting of a build; stored in the manifest.

    Args:
        capability: one of :data:`prompts.CAPABILITIES` or the user's own text.
        definition: required for a custom capability.
        n_general, m_fine: aspect hierarchy (paper: 4 × 6).
        per_level: descriptions per fine aspect and level (paper ω = 10).
        levels: a subset of easy/medium/hard.
        thresholds: ζ per level (paper: 1.0 / 0.8 / 0.8).
        max_redraws: redraws after the first drawing before an item is dropped.
        max_retries: extra attempts for a malformed examiner output.
        n_validation_questions: yes/no questions per image (paper: about 6).
        seed: seeds drawings and the letter balancing.
        draw_prefix: prepended to the description for the generator only.
        max_new_tokens, temperature: examiner decoding.
        avoid_list: ``per_level`` (the authors': a fresh semantic graph per level, words
            put on the avoid list stay in the graph) or ``shared_withheld`` (one graph per
            aspect across its levels, listed words leave it: the list grows by ``e`` words
            in round ``e``, 55 after a 10-round level).
        yes_no_reader: how a self-validation answer is read (:func:`parse.parse_yes_no`):
            ``package`` (default: "Yes." is yes, "yes or no" and "not yes" unclear) or
            ``authors`` (their ``tifa.py``: exactly "yes"/"no" after an "answer: " prefix;
            made for their "answer: [...]" prompt, it fails a check answered "Yes.").
    """

    capability: str = "spatial"
    definition: str | None = None
    n_general: int = 4
    m_fine: int = 6
    per_level: int = 10
    levels: tuple[str, ...] = P.LEVELS
    thresholds: dict[str, float] = field(default_factory=lambda: dict(PAPER_THRESHOLDS))
    max_redraws: int = 3
    max_retries: int = 2
    n_validation_questions: int = 6
    seed: int = 0
    draw_prefix: str = DRAW_PREFIX
    max_new_tokens: int = 1024
    temperature: float = 0.0
    avoid_list: str = "per_level"
    yes_no_reader: str = "package"

    def __post_init__(self) -> None:
        self.levels = tuple(self.levels)
        if self.avoid_list not in AVOID_LISTS:
            raise ValueError(f"avoid_list: expected one of {AVOID_LISTS}; got {self.avoid_list!r}")
        if self.yes_no_reader not in YES_NO_READERS:
            raise ValueError(f"yes_no_reader: expected one of {YES_NO_READERS}; got {self.yes_no_reader!r}")
        for name in ("n_general", "m_fine", "per_level", "n_validation_questions"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: expected an integer >= 1; got {getattr(self, name)!r}")
        for name in ("max_redraws", "max_retries"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name}: expected an integer >= 0; got {getattr(self, name)!r}")
        bad = [x for x in self.levels if x not in P.LEVELS]
        if bad or not self.levels:
            raise ValueError(f"levels: expected a non-empty subset of {P.LEVELS}; got {self.levels!r}")
        for lvl in self.levels:
            z = self.thresholds.get(lvl)
            if z is None or not 0.0 <= float(z) <= 1.0:
                raise ValueError(f"thresholds: expected a value in [0, 1] for level {lvl!r}; got {z!r}")
        P.capability_definition(self.capability, self.definition)  # raises on a bare custom name


@dataclass
class Item:
    item_id: str
    capability: str
    general_aspect: str
    aspect: str
    level: str
    description: str
    topic: str
    keywords: list[str]
    image: Image.Image
    alignment_score: float
    defects: list[str]
    draws: int
    question: str = ""
    options: list[str] = field(default_factory=list)
    answer: str = ""


@dataclass
class BuildResult:
    items: list[Item]
    dropped: list[dict[str, str]]
    manifest: dict[str, Any]

    @property
    def dropped_by_reason(self) -> dict[str, int]:
        return dict(Counter(f"{d['stage']}:{d['reason']}" for d in self.dropped))


def passes(score: float, threshold: float) -> bool:
    """§3.3: an image is kept when S >= ζ (tolerant to float rounding)."""
    return score >= threshold - 1e-9


def validation_outcome(answers: list[bool], questions: list[str], threshold: float):
    """(score, accepted, defects) for one drawing: S = share answered "yes";
    S < ζ redraw; ζ <= S < 1 keep and record the failed elements."""
    score = sum(answers) / len(answers) if answers else 0.0
    defects = [q for q, ok in zip(questions, answers) if not ok]
    return score, passes(score, threshold), defects


class _Drop(Exception):
    def __init__(self, stage: str, reason: str, detail: str = "") -> None:
        super().__init__(f"{stage}:{reason}")
        self.stage, self.reason, self.detail = stage, reason, detail


class Builder:
    """Runs the pipeline for one config with one examiner and one generator."""

    def __init__(self, config: BuildConfig, examiner: Examiner, generator: Generator,
                 cache: CallCache, log: Callable[[str], None] | None = None) -> None:
        self.cfg = config
        self.ex = CachedExaminer(examiner, cache, {"max_new_tokens": int(config.max_new_tokens),
                                                  "temperature": float(config.temperature),
                                                  "until": []})
        self.gen = generator
        self.cache = cache
        self.log = log or logger.info
        self.images_drawn = 0
        self.cap_name, self.cap_def = P.capability_definition(config.capability, config.definition)

    # -- examiner with bounded retries ------------------------------------
    def _ask(self, stage: str, prompt: str, parse, images=(), salt: str = ""):
        note = ""
        last: ParseError | None = None
        for attempt in range(self.cfg.max_retries + 1):
            text = self.ex(prompt + note, images, purpose=stage, salt=salt)
            try:
                return parse(text)
            except ParseError as exc:
                last = exc
                note = P.render(P.RETRY_NOTE, reason=exc.reason.replace("_", " "))
        assert last is not None
        raise _Drop(stage, last.reason, last.detail)

    def _draw(self, prompt: str, seed: int) -> Image.Image | GenerationFailure:
        key = self.cache.key(generator=self.gen.name, prompt=prompt, seed=seed)
        hit = self.cache.get_image(key)
        if hit is not None:
            return hit
        out = self.gen.generate([prompt], [seed])[0]
        self.images_drawn += 1
        if isinstance(out, Image.Image):
            self.cache.put_image(key, out)
        return out

    # -- stages -----------------------------------------------------------
    def aspects(self) -> list[Aspect]:
        cfg = self.cfg
        prompt = P.render(P.ASPECTS, aspect_count=cfg.n_general * cfg.m_fine, capability=self.cap_name,
                          definition=self.cap_def, n_general=cfg.n_general, m_fine=cfg.m_fine)
        try:
            return self._ask("aspects", prompt, lambda t: parse_aspects(t, cfg.n_general, cfg.m_fine))
        except _Drop as exc:
            raise BuildError(
                f"the examiner gave no usable aspect list after {cfg.max_retries + 1} attempts "
                f"({exc.reason}: {exc.detail}); nothing can be built"
            ) from None

    def _seed(self, item_id: str, draw: int) -> int:
        return int(stable_hash([self.cfg.seed, item_id, draw], 8), 16) % (2**31)

    def _validate_and_draw(self, item_id: str, level: str, desc: str):
        cfg = self.cfg
        questions = self._ask(
            "validation_questions",
            P.render(P.VALIDATION_QUESTIONS, n_questions=cfg.n_validation_questions, description=desc),
            lambda t: parse_validation_questions(t, cfg.n_validation_questions),
        )
        zeta = float(cfg.thresholds[level])
        failures = 0
        best = None
        for draw in range(cfg.max_redraws + 1):
            image = self._draw(cfg.draw_prefix + desc, self._seed(item_id, draw))
            if isinstance(image, GenerationFailure):
                failures += 1
                continue
            answers = []
            for q in questions:
                text = self.ex(P.render(P.VALIDATION_ANSWER, question=q), [image], purpose="validation_answer")
                try:
                    answers.append(parse_yes_no(text, cfg.yes_no_reader))
                except ParseError:
                    answers.append(False)  # an unreadable answer does not confirm the element
            score, ok, defects = validation_outcome(answers, questions, zeta)
            best = score if best is None else max(best, score)
            if ok:
                return image, score, defects, draw + 1
        if failures == cfg.max_redraws + 1:
            raise _Drop("draw", "generation_failure")
        raise _Drop("validation", "below_threshold", f"best score {best:.2f} < {zeta}")

    def run(self) -> BuildResult:
        cfg = self.cfg
        started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        aspects = self.aspects()
        self.log(f"autobench: {len(aspects)} fine-grained aspects")
        items: list[Item] = []
        dropped: list[dict[str, str]] = []
        guidelines: dict[str, str] = {}
        graphs: dict[str, dict] = {}
        for ai, asp in enumerate(aspects):
            ids = [f"{ai:02d}-{lvl}-{k:02d}" for lvl in cfg.levels for k in range(cfg.per_level)]
            try:
                guide = self._ask("guideline", P.render(P.GUIDELINE, aspect=asp.name, introduction=asp.introduction),
                                  parse_guideline)
            except _Drop as exc:
                dropped += [{"item_id": i, "stage": exc.stage, "reason": exc.reason, "detail": exc.detail} for i in ids]
                continue
            guidelines[asp.name] = guide
            shared = cfg.avoid_list == "shared_withheld"
            graph = SemanticGraph(withhold=shared)
            level_graphs = {}
            for lvl in cfg.levels:
                if not shared:  # the authors' code starts a new graph for every level
                    graph = level_graphs[lvl] = SemanticGraph()
                for k in range(cfg.per_level):
                    item_id = f"{ai:02d}-{lvl}-{k:02d}"
                    try:
                        items.append(self._item(item_id, asp, guide, lvl, graph))
                    except _Drop as exc:
                        dropped.append({"item_id": item_id, "stage": exc.stage, "reason": exc.reason,
                                        "detail": exc.detail})
                        self.log(f"autobench: dropped {item_id} ({exc.stage}: {exc.reason})")
            graphs[asp.name] = graph.to_dict() if shared else {lvl: g.to_dict() for lvl, g in level_graphs.items()}
        letters = balanced_letters(len(items), cfg.seed, groups=[i.level for i in items])
        for item, target in zip(items, letters):
            item.options, item.answer = move_answer(item.options, item.answer, target)
        result = BuildResult(items, dropped, {})
        result.manifest = {
            "format": "lmms-genbench-autobench/1",
            "started": started,
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "config": asdict(cfg),
            "capability": {"name": self.cap_name, "definition": self.cap_def},
            "examiner": self.ex.name,
            "examiner_gen_kwargs": self.ex.gen_kwargs,
            "generator": self.gen.name,
            "aspects": [asdict(a) for a in aspects],
            "guidelines": guidelines,
            "semantic_graphs": graphs,
            "n_items": len(items),
            "n_planned": len(aspects) * len(cfg.levels) * cfg.per_level,
            "dropped_by_reason": result.dropped_by_reason,
            "dropped": dropped,
            "answer_letters": letter_counts([i.answer for i in items]),
            "cost_this_run": {"examiner_calls": self.ex.calls, "images_drawn": self.images_drawn,
                              "cache_hits": dict(self.cache.hits)},
        }
        return result

    def _item(self, item_id: str, asp: Aspect, guide: str, level: str, graph: SemanticGraph) -> Item:
        level_defs = " ".join(P.DESCRIPTION_LEVELS[x] for x in P.LEVELS)
        prompt = P.render(P.DESCRIPTION, aspect=asp.name, introduction=asp.introduction, guidance=guide,
                          level_definitions=level_defs, level=level,
                          used_words_str=", ".join(graph.avoid_words) or "none")
        desc = self._ask("description", prompt, parse_description, salt=item_id)
        graph.add_round(desc.topic, desc.keywords)
        image, score, defects, draws = self._validate_and_draw(item_id, level, desc.prompt)
        qa = self._ask("qa", P.render(P.QA, aspect=asp.name, introduction=asp.introduction,
                                      elements="; ".join(defects) or " none", level=level, prompt=desc.prompt),
                       parse_qa, salt=item_id)
        return Item(item_id, self.cap_name, asp.general, asp.name, level, desc.prompt, desc.topic,
                    list(desc.keywords), image, score, defects, draws, qa.question, list(qa.options), qa.answer)


def default_build_cost(config: BuildConfig | None = None) -> dict[str, int]:
    """Examiner calls and images of a build where every output parses and every
    first drawing passes (the floor; each retry or redraw adds to it)."""
    c = config or BuildConfig()
    n_aspects = c.n_general * c.m_fine
    n_items = n_aspects * len(c.levels) * c.per_level
    per_item = 1 + 1 + c.n_validation_questions + 1  # description, questions, answers, Q&A
    calls = 1 + n_aspects + n_items * per_item
    return {"items": n_items, "examiner_calls": calls, "images": n_items,
            "examiner_calls_per_redraw": c.n_validation_questions,
            "worst_case_images": n_items * (c.max_redraws + 1),
            "worst_case_examiner_calls": 1 * (c.max_retries + 1)
            + n_aspects * (c.max_retries + 1)
            + n_items * ((c.max_retries + 1) * 3 + c.n_validation_questions * (c.max_redraws + 1))}


def build_benchmark(config: BuildConfig, examiner: Examiner, generator: Generator, out_dir,
                    cache_dir=None, push_to_hub: str | None = None,
                    log: Callable[[str], None] | None = None,
                    manifest_extra: dict[str, Any] | None = None) -> BuildResult:
    """Run the pipeline and write ``<out>/dataset`` and ``<out>/manifest.json``.

    ``cache_dir`` defaults to ``<out>/cache``; running again with the same
    settings resumes from it.
    """
    from pathlib import Path

    from .dataset import save

    out = Path(out_dir)
    cache = CallCache(Path(cache_dir) if cache_dir else out / "cache")
    result = Builder(config, examiner, generator, cache, log=log).run()
    result.manifest["cache_dir"] = str(cache.root)
    result.manifest.update(manifest_extra or {})
    save(result.items, result.manifest, out, push_to_hub=push_to_hub)
    return result
