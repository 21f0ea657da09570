"""The artifact store: where chains live on disk and everything that reads or writes them.

One public face for the engine, the scorers, ``analysis/`` and the CLI: the chain record
(chain.py), the layout of folders and files (layout.py), hop records and their verification
(verify.py), per-chain locks (locks.py), the background writer (writer.py), images held for
a scorer in the same process (held.py), failure markers of host answers (failures.py) and
merging stores by content hash (merge.py) and the scorers' features kept by content hash and
network (features.py). Nothing here imports the engine that runs chains.
"""

from . import held
from .chain import DIRECTIONS, Chain, ChainFailure, Direction, Kind, NotAChainError, hop_kind
from .failures import failure_marker, failure_reason
from .features import FEATURES, LAYOUTS, FeatureStore, feature_root, network_key, verify_features
from .layout import DEFAULT_ROOT_ENV, ArtifactStore, ChainLocation, default_root, encode_png
from .locks import LOCK_NAME, ChainLocks
from .merge import Conflict, MergeConflict, MergeReport, merge_stores
from .verify import (QUARANTINE, RECORDS, STORE_FORMAT, ChainCheck, append_record, chain_folders, check_chain,
                     hop_files, keeps_records, lost_markers, mark_records, marker_lost, read_records, read_records_checked, sha256_file,
                     text_cut_summary, verify_store)
from .writer import StoreWriteError, StoreWriter

__all__ = [
    "ArtifactStore", "Chain", "ChainCheck", "ChainFailure", "ChainLocation", "ChainLocks", "Conflict",
    "DEFAULT_ROOT_ENV", "DIRECTIONS", "Direction", "FEATURES", "FeatureStore", "Kind", "LAYOUTS", "LOCK_NAME", "MergeConflict", "MergeReport",
    "NotAChainError", "QUARANTINE", "RECORDS", "STORE_FORMAT", "StoreWriteError", "StoreWriter", "append_record",
    "chain_folders", "check_chain", "default_root", "encode_png", "failure_marker", "failure_reason", "feature_root", "held",
    "hop_files", "hop_kind", "keeps_records", "lost_markers", "mark_records", "marker_lost", "merge_stores", "network_key", "read_records", "read_records_checked", "sha256_file", "text_cut_summary", "verify_features",
    "verify_store",
]
