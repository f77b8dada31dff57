"""Results: append-only, one commit per finished trial, in SQLite (one file, the embedded
default) or PostgreSQL (one database that many lab machines write into at once)."""

from .base import Store, backend_for, looks_like_url, machine_id
from .postgres import Unreachable
from .records import TRIAL_FIELDS, Filter, Run, StoredCell
from .schema import VERSION as SCHEMA_VERSION
from .sqlite import refuse_existing
from .validate import STATUSES

__all__ = [
    "SCHEMA_VERSION", "STATUSES", "TRIAL_FIELDS", "Filter", "Run", "Store", "StoredCell",
    "Unreachable", "backend_for", "looks_like_url", "machine_id", "refuse_existing",
]
