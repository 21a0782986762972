"""Versioned, immutable result store: ``results/<study>/v<N>/`` with checksummed manifests.

Never imports torch.
"""

from __future__ import annotations

from robuststats.outcomes import cell_digest, cell_digests, cell_key
from robuststats.results._diff import TABLE_KEYS, DiffSummary, diff_versions, summarize_diff
from robuststats.results._manifest import Manifest
from robuststats.results._seal import INDEX, seal_problem
from robuststats.results._store import MANIFEST, ResultStore, ResultVersion, seal, sha256_file
from robuststats.results._verify import VerifyReport, verify
from robuststats.results._tables import (
    TABLES,
    confidence_level,
    is_analysis_only,
    normalize_table,
    read_table,
    read_tables,
)

__all__ = [
    "INDEX",
    "MANIFEST",
    "Manifest",
    "TABLES",
    "TABLE_KEYS",
    "ResultStore",
    "ResultVersion",
    "DiffSummary",
    "VerifyReport",
    "cell_digest",
    "cell_digests",
    "cell_key",
    "confidence_level",
    "diff_versions",
    "is_analysis_only",
    "normalize_table",
    "read_table",
    "read_tables",
    "seal",
    "seal_problem",
    "summarize_diff",
    "sha256_file",
    "verify",
]
