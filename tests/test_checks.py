import random
import re

from core.models import ResearchPlan, SearchResult
from engines.checks import check_draft
from engines.report_markdown import _footnote_definitions, cited_sentences, footnote_urls

from .support import page

PLAN = ResearchPlan(
    theme="Printing press",
    investigation_points=["Origins of printing press", "Impact of printing press"],
    search_queries=["printing press"],
)
SOURCES = [
    SearchResult(
        title="Printing press",
        url="https://example.org/press",
        content="The printing press was invented by Johannes Gutenberg around 1440 in Mainz.",
    ),
    SearchResult(
        title="Reformation",
        url="https://example.org/reformation",
        content="The printing press spread Martin Luther's writings rapidly across Germany.",
    ),
]
GOOD = """# Printing press

## Executive Summary

The printing press was invented by Johannes Gutenberg around 1440 in Mainz.[^1]

## Key Findings

- **Origins of printing press:** Johannes Gutenberg invented the printing press around 1440.[^1]
- **Impact of printing press:** The printing press spread Martin Luther's writings rapidly across Germany.[^2]

## Detailed Analysis

### Origins of printing press

_Only one passage._

## References

[^1]: [Printing press](https://example.org/press)
[^2]: [Reformation](https://example.org/reformation)
"""


def test_a_well_formed_cited_draft_scores_full_marks() -> None:
    checks = check_draft(GOOD, PLAN, SOURCES)
    assert checks.scores.model_dump() == {
        "fact_check": 1.0,
        "completeness": 1.0,
        "logic": 1.0,
        "format": 1.0,
    }
    assert checks.issues == []


def test_footnotes_after_the_full_stop_attach_to_their_sentence() -> None:
    claims = cited_sentences(
        "First claim about printing presses here.[^1] Second claim about paper mills here.[^2][^3]"
    )
    assert [refs for _, refs in claims] == [[1], [2, 3]]


def test_a_footnote_to_an_uncollected_url_fails_the_fact_check() -> None:
    draft = GOOD.replace("https://example.org/reformation", "https://elsewhere.example/made-up")
    checks = check_draft(draft, PLAN, SOURCES)
    assert checks.scores.fact_check < 0.9
    assert any("does not resolve" in i.description for i in checks.issues)


def test_a_claim_the_source_does_not_support_is_flagged() -> None:
    draft = GOOD.replace(
        "spread Martin Luther's writings rapidly across Germany",
        "was banned by every monarch of Europe for centuries",
    )
    checks = check_draft(draft, PLAN, SOURCES)
    assert any(
        i.type == "fact_check" and "does not support" in i.description for i in checks.issues
    )


def test_an_uncited_claim_is_flagged() -> None:
    draft = GOOD.replace("around 1440 in Mainz.[^1]", "around 1440 in Mainz.")
    checks = check_draft(draft, PLAN, SOURCES)
    assert any("without a source" in i.description for i in checks.issues)


def test_missing_sections_and_uncovered_points_are_reported() -> None:
    draft = GOOD.replace("## Key Findings", "## Findings").replace(
        "- **Impact of printing press:** The printing press spread Martin Luther's writings rapidly across Germany.[^2]\n",
        "",
    )
    checks = check_draft(draft, PLAN, SOURCES)
    assert checks.scores.format < 1.0
    assert checks.uncovered_points == ["Impact of printing press"]
    assert checks.scores.completeness == 0.5


def test_repeated_sentences_lower_the_logic_score() -> None:
    draft = GOOD.replace(
        "_Only one passage._",
        "The printing press was invented by Johannes Gutenberg around 1440 in Mainz.[^1]",
    )
    checks = check_draft(draft, PLAN, SOURCES)
    assert checks.scores.logic < 1.0
    assert any(i.type == "logic" for i in checks.issues)


def test_misnumbered_references_are_a_format_issue() -> None:
    draft = GOOD.replace("[^2]", "[^3]")
    checks = check_draft(draft, PLAN, SOURCES)
    assert any("numbered" in i.description for i in checks.issues)


def test_bullets_and_bold_labels_are_not_part_of_the_claim() -> None:
    claims = cited_sentences(
        "- **Origins:** Gutenberg built the press in Mainz.[^1]\n1. Paper mills spread in Europe.[^2]"
    )
    assert claims == [
        ("Gutenberg built the press in Mainz.", [1]),
        ("Paper mills spread in Europe.", [2]),
    ]


def test_footnote_definitions_are_found_exactly_where_a_line_starts_with_one() -> None:
    # The reference: `^` in multiline mode, which tries every position of the text.
    reference = re.compile(r"^\[\^(\d+)\]:\s*(.+)$", re.MULTILINE)
    pieces = ["[^1]:", "[^23]: ", "[^4]", "\n", " ", "\t", "x", "https://a.example/b", ":", "[^"]
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        found = _footnote_definitions(text)
        assert [m.groups() for m in found] == reference.findall(text), repr(text)
        assert [m.span() for m in found] == [m.span() for m in reference.finditer(text)]


def test_a_reference_resolves_to_the_link_that_ends_it_whatever_its_title_holds() -> None:
    body = (
        "A claim.[^1] Another.[^2] A third.[^3]\n\n## References\n\n"
        "[^1]: [Handbook \\[guide\\](https://phish.example/login)](https://example.org/a)\n"
        "[^2]: [\\<img src=x onerror=alert(1)\\>](https://example.org/b)\n"
        "[^3]: <https://example.org/c>\n"
    )
    assert footnote_urls(body) == {
        1: "https://example.org/a",
        2: "https://example.org/b",
        3: "https://example.org/c",
    }


def test_a_summary_that_never_names_the_subject_lowers_the_logic_score() -> None:
    wu = page(
        "Chien-Shiung Wu",
        "Chien-Shiung Wu was an experimental physicist, called the Chinese Marie Curie.",
    )
    curie = page(
        "Marie Curie", "Marie Curie was a Polish physicist and chemist who discovered radium."
    )
    plan = ResearchPlan(
        theme="the life of Marie Curie", investigation_points=["Marie Curie"], search_queries=["x"]
    )

    def draft(summary: str) -> str:
        return GOOD.replace(
            GOOD.split("## Executive Summary\n\n")[1].split("\n")[0], summary
        ).replace("(https://example.org/press)", f"({wu.url})")

    astray = check_draft(
        draft("Chien-Shiung Wu was an experimental physicist.[^1]"), plan, [wu, curie]
    )
    assert any("never names the subject" in i.description for i in astray.issues)
    named = check_draft(
        draft("Chien-Shiung Wu was called the Chinese Marie Curie.[^1]"), plan, [wu, curie]
    )
    assert not any("never names the subject" in i.description for i in named.issues)
    assert astray.scores.logic < named.scores.logic
