"""Metric building blocks: GC@T aggregation, MCD, GenEval and MGG, Fréchet distance, FID
features, encoders.

Importing this package is cheap: numpy only. torch, transformers, clean-fid and
sentence-transformers load when an encoder or feature extractor is built.
"""

from .networks.encoders import (
    LONG_TEXT_MODES,
    SHIPPED_MINILM,
    CLIPImageEncoder,
    CLIPTextEncoder,
    DINOEncoder,
    ImageEncoder,
    SentenceEncoder,
    TextEncoder,
    ViTCLSEncoder,
    build_image_encoder,
    build_text_encoder,
    clear_encoder_cache,
    get_image_encoder,
    get_text_encoder,
)
from .functional.fid import FrechetStats, frechet_distance
from .functional.gc import gc_at_t, gc_at_t_rows, gc_fid_at_t, gc_weights, step_weighted_mean
from .functional.geneval import (
    Detection,
    GenEvalResult,
    GenEvalRules,
    GenEvalStats,
    evaluate_detections,
)
from .networks.detection import build_color_classifier, build_detector, evaluate_image
from .networks.inception import (
    FID_IMAGE_SIZE,
    FIDFeatureExtractor,
    build_fid_extractor,
    clean_fid_preprocess,
    clear_fid_extractor_cache,
    fid_helper_model_path,
    get_fid_extractor,
)
from .scorers.mcd import MAPPINGS as DRIFT_MAPPINGS
from .scorers.mcd import (
    DriftScorerConfig,
    DriftStats,
    drift_record,
    score_drift_chains,
)

# not bound as ``mcd``: that name is the submodule (``import lmms_genbench.metrics.scorers.mcd``)
from .scorers.mcd import mcd as mean_cumulative_drift
from .scorers.mcd import report_value as drift_report_value
from .scorers.mgg import MGGScorerConfig, mgg_record, score_mgg_chains
from .scorers.mgg import report_value as mgg_report_value
from .functional.similarity import cosine_similarity, l2_normalize
from ..smoke.vision import TinyCLIP, TinyViT, tiny_clip, tiny_vit

__all__ = [
    "DRIFT_MAPPINGS",
    "FID_IMAGE_SIZE",
    "LONG_TEXT_MODES",
    "SHIPPED_MINILM",
    "CLIPImageEncoder",
    "CLIPTextEncoder",
    "DINOEncoder",
    "Detection",
    "DriftScorerConfig",
    "DriftStats",
    "FIDFeatureExtractor",
    "FrechetStats",
    "GenEvalResult",
    "GenEvalRules",
    "GenEvalStats",
    "ImageEncoder",
    "MGGScorerConfig",
    "SentenceEncoder",
    "TextEncoder",
    "TinyCLIP",
    "TinyViT",
    "ViTCLSEncoder",
    "build_color_classifier",
    "build_detector",
    "build_fid_extractor",
    "build_image_encoder",
    "build_text_encoder",
    "clean_fid_preprocess",
    "clear_encoder_cache",
    "clear_fid_extractor_cache",
    "cosine_similarity",
    "drift_record",
    "drift_report_value",
    "evaluate_detections",
    "evaluate_image",
    "fid_helper_model_path",
    "frechet_distance",
    "gc_at_t",
    "gc_at_t_rows",
    "gc_fid_at_t",
    "gc_weights",
    "get_fid_extractor",
    "get_image_encoder",
    "get_text_encoder",
    "l2_normalize",
    "mean_cumulative_drift",
    "mgg_record",
    "mgg_report_value",
    "score_drift_chains",
    "score_mgg_chains",
    "step_weighted_mean",
    "tiny_clip",
    "tiny_vit",
]
