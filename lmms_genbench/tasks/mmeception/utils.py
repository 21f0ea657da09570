"""MMECeption task functions: thin glue between lmms-eval and lmms_genbench.

Scoring lives in ``lmms_genbench.metrics.scorers.genception`` (imported once per
process); this module only maps docs. The chain length and the scorer settings come
from the task YAML's ``generation_kwargs``.
"""

from lmms_genbench.data.photos import folder_records, load_package_photo
from lmms_genbench.metrics.scorers.genception import GENCEPTION

# GenCeption's P_Desc (paper Table 1), verbatim
P_DESC = (
    "Please write a clear, precise, detailed, and concise description of all elements in the image. "
    "Focus on accurately depicting various aspects, including but not limited to the colors, shapes, "
    "positions, styles, texts and the relationships between different objects and subjects in the image. "
    "Your description should be thorough enough to guide a professional in recreating this image solely "
    "based on your textual representation. Remember, only include descriptive texts that directly pertain "
    "to the contents of the image. You must complete the description using less than 500 words."
)
# MME's categories as the GenCeption leaderboard groups them (REFERENCE_NOTES)
MME_GROUPS = {
    "visual": ["existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark", "artwork", "commonsense_reasoning"],
    "textual": ["code_reasoning", "numerical_calculation", "text_translation", "OCR"],
}
FOLDER_ENV = "MMECEPTION_IMAGE_DIR"


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

    from lmms_genbench.core.errors import ActionableError

    # one line and exit 1 (an exception here is retried, printed and exits 0 in lmms-eval)
    fix = f"set {FOLDER_ENV} to a folder that holds .jpg/.png images (sub-folders become categories)"
    root = os.environ.get(FOLDER_ENV)
    if not root:
        raise ActionableError(f"task mmeception_folder reads the folder that {FOLDER_ENV} names, and it is not set", fix)
    try:
        records = folder_records(root)
    except (OSError, ValueError) as exc:
        raise ActionableError(f"task mmeception_folder: {exc}", fix) from None
    return datasets.Dataset.from_list(records)


def process_results(doc, results):
    return GENCEPTION.process_results(doc, results)


def process_results_mme(doc, results):
    return GENCEPTION.process_results(doc, results, groups=MME_GROUPS)


def aggregate(items):
    return GENCEPTION.aggregate(items)
