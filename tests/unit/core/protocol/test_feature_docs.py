"""The docs' feature table cannot drift from the registry every operation asks."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_delta_provider.core.protocol.features import FEATURES, Operation, Support, feature_table_markdown

DOCS = Path(__file__).resolve().parents[4] / "docs"


def test_docs_feature_table_is_the_registry() -> None:
    text = (DOCS / "features.md").read_text()
    block = re.search(r"<!-- feature-table:begin -->\n(.*?)<!-- feature-table:end -->", text, re.DOTALL)
    assert block is not None, "docs/features.md lost its feature-table markers"
    assert block.group(1) == feature_table_markdown(), (
        "docs/features.md is out of date: run `python scripts/feature_table.py`"
    )


def test_every_refused_feature_says_why() -> None:
    table = feature_table_markdown()
    for feature in FEATURES.values():
        assert f"| `{feature.name}` |" in table
        if any(s is Support.NO for s in feature.support.values()) and feature.name != "rowTracking":
            assert feature.note, f"{feature.name} is refused without a reason in its note"
    refused_everywhere = {f.name for f in FEATURES.values() if f.support[Operation.READ] is Support.NO}
    assert {"geospatial", "collations", "variantType", "catalogManaged"} <= refused_everywhere
