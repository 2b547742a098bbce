"""Embedded user-defined indexes: kinds, their builders and evidence, the region format.

Importing the package registers every kind (``base.REGISTRY``): "distinct",
"bloom", "zone_maps", "hll". See ``docs/embedded-indexes.md``.
"""

from pqindex.indexes import bloom_file, distinct, hll, zone_maps
from pqindex.indexes.base import REGISTRY, Blob, IndexKind, Scope, register
from pqindex.indexes.encoding import RegionError, RegionVersionError
from pqindex.indexes.region import (
    REGION_KEY,
    BlobEntry,
    Region,
    encode_region,
    read_region,
    region_key_value,
)

__all__ = [
    "REGION_KEY",
    "REGISTRY",
    "Blob",
    "BlobEntry",
    "IndexKind",
    "Region",
    "RegionError",
    "RegionVersionError",
    "Scope",
    "bloom_file",
    "distinct",
    "encode_region",
    "hll",
    "read_region",
    "region_key_value",
    "register",
    "zone_maps",
]
