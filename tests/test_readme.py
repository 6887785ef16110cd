"""The README's speed figures are the benchmarks' own: each ratio it quotes appears in the section of
``benchmarks/README.md`` its row links to, and the row's date is that section's.

When a benchmark is re-run and its section rewritten, this test fails until the README quotes the
new figures (or links to the section that still holds the old ones, with its date).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BENCHMARKS = REPO / "benchmarks" / "README.md"
#: A ratio: ``0.16x``, a range ``0.18-0.30x`` or ``0.02x-0.33x``.
RATIO = re.compile(r"(?<![\d.])(?P<low>\d+\.\d+)x?(?:-(?P<high>\d+\.\d+))?x\b")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
LINK = re.compile(r"\]\((?P<path>benchmarks/README\.md)#(?P<anchor>[^)]+)\)")


def ratios(text: str) -> list[str]:
    """Every number of every ratio in ``text``, as written (a range gives both ends)."""
    found = []
    for match in RATIO.finditer(text):
        found += [n for n in (match["low"], match["high"]) if n]
    return found


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(markdown: str) -> dict[str, str]:
    """Each heading's anchor -> its section's text: the heading and everything up to the next heading
    of the same or a higher level (subsections included). Repeated headings get GitHub's ``-1``..."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    lines = markdown.splitlines()
    headings = [
        (int(token.tag[1]), token.map[0], tokens[i + 1].content)
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.map is not None
    ]
    found: dict[str, str] = {}
    for n, (level, start, title) in enumerate(headings):
        end = next((line for lvl, line, _ in headings[n + 1 :] if lvl <= level), len(lines))
        slug = base = github_slug(title)
        repeat = 0
        while slug in found:
            repeat += 1
            slug = f"{base}-{repeat}"
        found[slug] = "\n".join(lines[start:end])
    return found


def quoted_in(figure: str, section: str) -> bool:
    """Whether ``figure`` (``0.16``) is, at its own precision, one of the section's ratios (``0.156x``)."""
    places = Decimal(figure).as_tuple().exponent
    step = Decimal(1).scaleb(places)
    return any(
        Decimal(value).quantize(step, rounding=ROUND_HALF_UP) == Decimal(figure) for value in ratios(section)
    )


@dataclass(frozen=True)
class Row:
    line: int
    text: str


def speed_rows() -> list[Row]:
    """The rows of the README's speed table (the header and its rule left out)."""
    text = README.read_text()
    section = sections(text)["speed"]
    start = text.splitlines().index(section.splitlines()[0])
    return [
        Row(start + n + 1, line)
        for n, line in enumerate(section.splitlines())
        if line.startswith("|") and not line.startswith(("| What |", "|---"))
    ]


def test_the_speed_table_is_there() -> None:
    assert len(speed_rows()) >= 5


@pytest.mark.parametrize("row", speed_rows(), ids=lambda r: f"README.md:{r.line}")
def test_each_figure_is_the_benchmarks_own_with_its_date(row: Row) -> None:
    benchmark_sections = sections(BENCHMARKS.read_text())
    links = LINK.findall(row.text)
    assert links, f"README.md:{row.line}: link the row to its section of benchmarks/README.md"
    for _, anchor in links:
        assert anchor in benchmark_sections, (
            f"README.md:{row.line}: benchmarks/README.md has no section #{anchor} (renamed or removed?); "
            f"its sections: {sorted(benchmark_sections)}"
        )
    section = "\n".join(benchmark_sections[anchor] for _, anchor in links)
    missing = [f"{figure}x" for figure in ratios(row.text) if not quoted_in(figure, section)]
    assert not missing, (
        f"README.md:{row.line}: {missing} not among the ratios of the section it links to: quote the "
        f"benchmarks' current figures"
    )
    dates = DATE.findall(row.text)
    assert dates, f"README.md:{row.line}: give the date of the run the figures come from"
    assert all(date in section for date in dates), f"README.md:{row.line}: the section is not of {dates}"


def test_every_ratio_in_the_readme_is_in_the_speed_table() -> None:
    table = "\n".join(row.text for row in speed_rows())
    outside = ratios(README.read_text().replace(table, ""))
    assert not outside, f"Ratios outside the speed table, where nothing checks them: {outside}"


@pytest.mark.parametrize(
    ("figure", "section", "quoted"),
    [
        ("0.16", "| core | 0.156x |", True),
        ("0.505", "0.39x / 0.40x / 0.505x", True),
        ("0.30", "0.18-0.3x", True),
        ("0.33", "(0.02x-0.33x of delta-rs)", True),
        ("0.72", "1.27-1.48x, ~1.3x", False),
        ("0.16", "took 0.16 s", False),
        ("0.6", "0.505x", False),
    ],
)
def test_a_figure_is_matched_at_its_own_precision_among_ratios_only(
    figure: str, section: str, quoted: bool
) -> None:
    assert quoted_in(figure, section) is quoted
