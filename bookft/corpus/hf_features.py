"""The Hugging Face `datasets` metadata of an Arrow schema, written without importing `datasets`.

A corpus folder is what `datasets.load_from_disk` opens: Arrow shards whose schema metadata holds the
features (key `huggingface`), plus `dataset_info.json` and `state.json`. Building that metadata with
`datasets.Features.from_arrow_schema` would import `datasets` (1.5-3.4 s on this 2-core host, more than a
whole single-book ingest takes), for three fixed schemas (bookft/corpus/writer.py). So the few Arrow
types those schemas use are mapped here by hand, and tests/ingest/test_ingest_streaming.py checks
the output byte for byte against `datasets` itself (and that `load_from_disk` reads it back).
"""

from __future__ import annotations

import json
import os

import pyarrow as pa

_VALUE = {pa.string(): "string", pa.large_string(): "large_string", pa.int32(): "int32", pa.int64(): "int64",
          pa.float32(): "float32", pa.float64(): "float64", pa.bool_(): "bool"}


def feature(t: pa.DataType) -> dict:
    """One Arrow type -> its `datasets` feature as `Features.to_dict()` writes it (datasets >= 4)."""
    if pa.types.is_list(t):
        return {"feature": feature(t.value_type), "_type": "List"}
    if t in _VALUE:
        return {"dtype": _VALUE[t], "_type": "Value"}
    raise TypeError(f"no datasets feature mapping for Arrow type {t} (bookft/corpus/hf_features.py)")


def features(schema: pa.Schema) -> dict:
    return {f.name: feature(f.type) for f in schema}


def with_features(schema: pa.Schema) -> pa.Schema:
    """The schema with the `huggingface` metadata `Features.arrow_schema` adds."""
    meta = json.dumps({"info": {"features": features(schema)}})
    return schema.with_metadata({"huggingface": meta})


def dataset_info(schema: pa.Schema) -> dict:
    """`dataset_info.json` as `save_to_disk` writes it for a dataset with only features set (keys sorted)."""
    return {"citation": "", "description": "", "features": features(schema), "homepage": "", "license": ""}


def random_fingerprint() -> str:
    """A `state.json` fingerprint: 64 random bits in hex, as `datasets.fingerprint.generate_random_fingerprint`."""
    return os.urandom(8).hex()
