"""The protocol engine shared by every cyclic task."""

from .cycle import ChainFailure, ChainJob, ChainOutcome, CycleEngine, RunStats, generation_seed
from .describer import Describer, LmmsDescriber
from .images import BadImageError, normalize_image
from .protocol import ChainSpec, GENCEPTION_GENERATE_PROMPT
from .store import ArtifactStore, ChainLocation

__all__ = [
    "ArtifactStore",
    "BadImageError",
    "ChainFailure",
    "ChainJob",
    "ChainLocation",
    "ChainOutcome",
    "ChainSpec",
    "CycleEngine",
    "Describer",
    "GENCEPTION_GENERATE_PROMPT",
    "LmmsDescriber",
    "RunStats",
    "generation_seed",
    "normalize_image",
]
