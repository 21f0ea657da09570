"""Metrics in three layers: ``functional`` (pure maths and mergeable accumulators),
``networks`` (a spec -> a cached network) and ``scorers`` (stored chains -> a report).

Importing this package is cheap: numpy only. torch, transformers, clean-fid and
sentence-transformers load when an encoder or feature extractor is built.
"""

from ..core.lazy import lazy_exports

# public name -> where it lives; imported on first use, so that importing one
# submodule (functional.intervals) loads neither networks, scorers nor the engine
_EXPORTS = {
    "build_color_classifier": ".networks.detection",
    "build_detector": ".networks.detection",
    "build_fid_extractor": ".networks.inception",
    "build_image_encoder": ".networks.encoders",
    "build_text_encoder": ".networks.encoders",
    "ChainRecord": ".scorers.records",
    "ChainScorer": ".scorers.base",
    "clean_fid_preprocess": ".networks.inception",
    "clear_encoder_cache": ".networks.encoders",
    "clear_fid_extractor_cache": ".networks.inception",
    "CLIPImageEncoder": ".networks.encoders",
    "CLIPTextEncoder": ".networks.encoders",
    "cosine_similarity": ".functional.similarity",
    "Detection": ".functional.geneval",
    "DINOEncoder": ".networks.encoders",
    "DRIFT_MAPPINGS": ".functional.drift:MAPPINGS",
    "DriftSettings": ".scorers.mcd",
    "DriftStats": ".functional.drift",
    "evaluate_detections": ".functional.geneval",
    "evaluate_image": ".networks.detection",
    "fid_helper_model_path": ".networks.inception",
    "FID_IMAGE_SIZE": ".networks.inception",
    "FIDFeatureExtractor": ".networks.inception",
    "frechet_distance": ".functional.fid",
    "FrechetStats": ".functional.fid",
    "gc_at_t": ".functional.gc",
    "gc_at_t_rows": ".functional.gc",
    "gc_fid_at_t": ".functional.gc",
    "gc_weights": ".functional.gc",
    "GENCEPTION": ".scorers.genception",
    "GenCeptionScorer": ".scorers.genception",
    "GenCeptionSettings": ".scorers.genception",
    "GenEvalResult": ".functional.geneval",
    "GenEvalRules": ".functional.geneval",
    "GenEvalStats": ".functional.geneval",
    "get_fid_extractor": ".networks.inception",
    "get_image_encoder": ".networks.encoders",
    "get_text_encoder": ".networks.encoders",
    "ImageEncoder": ".networks.encoders",
    "l2_normalize": ".functional.similarity",
    "LONG_TEXT_MODES": ".networks.encoders",
    "MCD": ".scorers.mcd",
    "MCDScorer": ".scorers.mcd",
    "mean_cumulative_drift": ".functional.drift:mcd",
    "MetricItem": ".scorers.records",
    "MGG": ".scorers.mgg",
    "MGGScorer": ".scorers.mgg",
    "MGGSettings": ".scorers.mgg",
    "SentenceEncoder": ".networks.encoders",
    "SHIPPED_MINILM": ".networks.encoders",
    "step_weighted_mean": ".functional.gc",
    "TextEncoder": ".networks.encoders",
    "tiny_clip": "..smoke.vision",
    "tiny_vit": "..smoke.vision",
    "TinyCLIP": "..smoke.vision",
    "TinyViT": "..smoke.vision",
    "ViTCLSEncoder": ".networks.encoders",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
