"""Metrics in three layers: ``functional`` (pure maths and mergeable accumulators),
``networks`` (a spec -> a cached network) and ``scorers`` (stored chains -> a report).

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
from .functional.drift import MAPPINGS as DRIFT_MAPPINGS
from .functional.drift import DriftStats

# not bound as ``mcd``: the scorer instance is ``MCD``
from .functional.drift import mcd as mean_cumulative_drift
from .scorers.base import ChainRecord, ChainScorer, MetricItem
from .scorers.genception import GENCEPTION, GenCeptionScorer, GenCeptionSettings
from .scorers.mcd import MCD, DriftSettings, MCDScorer
from .scorers.mgg import MGG, MGGScorer, MGGSettings
from .functional.similarity import cosine_similarity, l2_normalize
from ..smoke.vision import TinyCLIP, TinyViT, tiny_clip, tiny_vit

__all__ = [
    "CLIPImageEncoder",
    "CLIPTextEncoder",
    "ChainRecord",
    "ChainScorer",
    "DINOEncoder",
    "DRIFT_MAPPINGS",
    "Detection",
    "DriftSettings",
    "DriftStats",
    "FIDFeatureExtractor",
    "FID_IMAGE_SIZE",
    "FrechetStats",
    "GENCEPTION",
    "GenCeptionScorer",
    "GenCeptionSettings",
    "GenEvalResult",
    "GenEvalRules",
    "GenEvalStats",
    "ImageEncoder",
    "LONG_TEXT_MODES",
    "MCD",
    "MCDScorer",
    "MGG",
    "MGGScorer",
    "MGGSettings",
    "MetricItem",
    "SHIPPED_MINILM",
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
    "step_weighted_mean",
    "tiny_clip",
    "tiny_vit",
]
