"""Rewrite the generated feature table in docs/features.md from the core's feature registry."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from airflow_delta_provider.core.protocol import feature_table_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "features.md"
BLOCK = re.compile(r"(<!-- feature-table:begin -->\n).*?(<!-- feature-table:end -->)", re.DOTALL)


def render(text: str) -> str:
    """``text`` with the block between the markers replaced by the generated table."""
    return BLOCK.sub(lambda m: m.group(1) + feature_table_markdown() + m.group(2), text)


if __name__ == "__main__":
    DOC.write_text(render(DOC.read_text()))
    sys.stdout.write(f"Rewrote the feature table in {DOC}.\n")
