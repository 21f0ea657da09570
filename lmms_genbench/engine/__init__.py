"""The protocol engine shared by every cyclic task."""

from .cycle import ChainJob, ChainOutcome, CycleEngine, RunStats, generation_seed
from .describer import Describer, LazyDescriber, LmmsDescriber
from .images import BadImageError, normalize_image
from .protocol import ChainSpec, GENCEPTION_GENERATE_PROMPT
from ..store import ArtifactStore, Chain, ChainFailure, ChainLocation, NotAChainError

__all__ = [
    "ArtifactStore",
    "BadImageError",
    "Chain",
    "ChainFailure",
    "ChainJob",
    "ChainLocation",
    "ChainOutcome",
    "ChainSpec",
    "CycleEngine",
    "Describer",
    "GENCEPTION_GENERATE_PROMPT",
    "LazyDescriber",
    "LmmsDescriber",
    "NotAChainError",
    "RunStats",
    "generation_seed",
    "normalize_image",
]
