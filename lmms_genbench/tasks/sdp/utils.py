"""Semantic Drift Protocol tasks: thin glue between lmms-eval and lmms_genbench.

Each image-caption pair becomes two docs, a text-first and an image-first
chain; the cycle model reads the direction from the doc. Scoring lives in
``lmms_genbench.metrics.scorers.mcd`` and ``.mgg``; the chain length and the scorer
settings come from the task YAML's ``generation_kwargs``.
"""

import os

from lmms_genbench.data.photos import load_package_photo
from lmms_genbench.metrics.scorers.mcd import MCD
from lmms_genbench.metrics.scorers.mgg import MGG

# The paper publishes no I2T prompt (its chains are "captioned"); this default asks
# for one detailed paragraph, like the DOCCI captions the chains start from.
I2T_PROMPT = "Describe this image in one detailed paragraph."
DIRECTIONS = ("text_first", "image_first")


# run-time inputs (lmms-eval has no task arguments)
PAIRS_ENV = "LMMS_GENBENCH_ND400_PAIRS"  # a pair list from `lmms-genbench sdp resample`
# "1": run on the pairs that join, logging the missing ones (a partial mirror); default "0": raise
ALLOW_MISSING_ENV = "LMMS_GENBENCH_ND400_ALLOW_MISSING"
GENEVAL_ENV = "LMMS_GENBENCH_GENEVAL_METADATA"  # default: `lmms-genbench sdp fetch-geneval`'s file
GENEVAL_PROMPTS_ENV = "LMMS_GENBENCH_GENEVAL_PROMPTS"  # optional rewritten prompts (GenEval-R)


def doc_to_visual(doc):
    if doc.get("prompt") is not None:
        return []  # a GenEval chain starts from its text
    if doc.get("image") is not None:
        return [doc["image"]]
    return [load_package_photo(doc["pair_id"])]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return I2T_PROMPT


def both_directions(dataset):
    """Two docs per pair, one per chain direction, next to each other (images are not decoded):
    ``--limit N`` then runs both directions of the first pairs, so every mapping gets chains."""
    import datasets

    halves = []
    for direction in DIRECTIONS:
        half = dataset.add_column("direction", [direction] * len(dataset))
        halves.append(half.add_column("chain_id", [f"{p}#{direction}" for p in dataset["pair_id"]]))
    n = len(dataset)
    return datasets.concatenate_datasets(halves).select([i + d * n for i in range(n) for d in range(len(halves))])


def nd400_docs(dataset):
    """Nocaps+Docci400: join the pair list (``mollahsabbir/nd400``) to its sources.

    DOCCI rows come from ``google/docci`` (config ``docci``, test split, keyed by
    ``example_id``, ``description``), NoCaps rows from ``HuggingFaceM4/NoCaps``
    (validation split, keyed by ``image_file_name``, first of ``annotations_captions``),
    as the authors' ``prepare_dataset.py`` (see ``lmms_genbench.data.sdp``). A pair that
    does not join stops the task with its id, unless ``$LMMS_GENBENCH_ND400_ALLOW_MISSING=1``.
    """
    import datasets

    from lmms_genbench.core.args import as_choice
    from lmms_genbench.data.sdp import MissingPairsError, join_nd400, load_pair_list

    allow = as_choice(ALLOW_MISSING_ENV, os.environ.get(ALLOW_MISSING_ENV) or "0", ("0", "1")) == "1"
    pairs = load_pair_list(os.environ[PAIRS_ENV]) if os.environ.get(PAIRS_ENV) else dataset
    try:
        rows = join_nd400(pairs, allow_missing=allow)
    except MissingPairsError as exc:
        hint = "" if allow else f". {ALLOW_MISSING_ENV}=1 runs on the pairs that join (logging the others)"
        raise MissingPairsError(f"{exc}{hint}", exc.missing) from None
    return both_directions(datasets.Dataset.from_list(rows))


def geneval_docs(dataset):
    """GenEval's prompts from ``$LMMS_GENBENCH_GENEVAL_METADATA`` (default: the file
    ``lmms-genbench sdp fetch-geneval`` writes), optionally rewritten ones from
    ``$LMMS_GENBENCH_GENEVAL_PROMPTS``; the placeholder dataset is replaced."""
    import datasets

    from lmms_genbench.data.sdp import default_geneval_path, load_geneval_docs

    path = os.environ.get(GENEVAL_ENV) or str(default_geneval_path())
    if not os.path.isfile(path):
        raise FileNotFoundError(f"sdp_geneval needs GenEval's evaluation_metadata.jsonl: run `lmms-genbench sdp fetch-geneval` or set {GENEVAL_ENV} to the file (looked for {path})")
    return datasets.Dataset.from_list(load_geneval_docs(path, os.environ.get(GENEVAL_PROMPTS_ENV) or None))


def geneval_smoke_docs(dataset):
    import datasets

    from lmms_genbench.data.sdp import load_geneval_docs

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "geneval_smoke.jsonl")
    return datasets.Dataset.from_list(load_geneval_docs(here, warn_if_not_geneval=False))


def process_results_mcd(doc, results):
    return MCD.process_results(doc, results)


def aggregate_mcd(items):
    return MCD.aggregate(items)


def process_results_mgg(doc, results):
    return MGG.process_results(doc, results)


def aggregate_mgg(items):
    return MGG.aggregate(items)
