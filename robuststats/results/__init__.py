"""Versioned, immutable result store: ``results/<study>/v<N>/`` with checksummed manifests.

Never imports torch.
"""

from __future__ import annotations

from robuststats.results._diff import TABLE_KEYS, diff_versions
from robuststats.results._store import (
    MANIFEST,
    ResultStore,
    ResultVersion,
    VerifyReport,
    seal,
    sha256_file,
    verify,
)

__all__ = [
    "MANIFEST",
    "TABLE_KEYS",
    "ResultStore",
    "ResultVersion",
    "VerifyReport",
    "diff_versions",
    "seal",
    "sha256_file",
    "verify",
]
