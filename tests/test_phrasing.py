"""The same question in other words gives the same research.

Five subjects, each asked five ways (a bare noun phrase, "what is/who was ...?", "tell me
about ...", lower-case keywords of the subject, a request: "explain X to a child"), run
end to end with the extractive engine over real encyclopaedia summaries
(`fixtures/phrasing`: Wikipedia lead sections, CC BY-SA 4.0,
chosen as what runs on these phrasings read from the demo corpus, beside the articles a
plain keyword search ranks first). The sources each phrasing cites must largely agree.
"""

import itertools
import re
from pathlib import Path

import pytest

from engines.extractive import ExtractiveEngine
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.corpus_files import iter_documents
from tools.local_corpus import LocalCorpus, build_index

from .support import run_graph, start

FIXTURE = Path(__file__).parent / "fixtures" / "phrasing"
# Jaccard overlap of the cited sets of any two phrasings of one subject.
SAME_RESEARCH = 0.6
SUBJECTS = {
    "volcano": (
        "Volcano",
        "what is a volcano?",
        "tell me about volcanoes",
        "volcanoes",
        "can you explain volcanoes simply?",
    ),
    "chess": ("Chess", "what is chess?", "tell me about chess", "chess", "I want to learn chess"),
    "photosynthesis": (
        "Photosynthesis",
        "what is photosynthesis?",
        "tell me about photosynthesis",
        "photosynthesis",
        "explain photosynthesis to a child",
    ),
    "curie": (
        "Marie Curie",
        "who was Marie Curie?",
        "tell me about Marie Curie",
        "marie curie",
        "give me an overview of Marie Curie",
    ),
    "wall": (
        "The Great Wall of China",
        "what is the Great Wall of China?",
        "tell me about the great wall of china",
        "great wall china",
        "tell me everything about the Great Wall of China",
    ),
}


@pytest.fixture(scope="module")
def phrasing_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = tmp_path_factory.mktemp("phrasing") / "index.sqlite"
    build_index(iter_documents(FIXTURE), index)
    return index


def cited(report: str) -> set[str]:
    """The URLs the report's References list."""
    return set(re.findall(r"\]\((\S+)\)$", report.partition("## References")[2], re.MULTILINE))


@pytest.mark.parametrize("subject", SUBJECTS)
async def test_the_same_question_in_other_words_cites_the_same_sources(
    subject: str, phrasing_index: Path, graph: ResearchGraph
) -> None:
    corpus = LocalCorpus(phrasing_index)
    try:
        deps = Deps(engine=ExtractiveEngine(), search=corpus)
        reports = {}
        for n, topic in enumerate(SUBJECTS[subject]):
            values = await run_graph(graph, deps, f"{subject}-{n}", start(topic, min_sources=3))
            reports[topic] = cited(values["final_report"])
    finally:
        corpus.close()
    overlaps = {
        (a, b): len(reports[a] & reports[b]) / len(reports[a] | reports[b])
        for a, b in itertools.combinations(reports, 2)
    }
    assert all(reports.values()), reports
    assert min(overlaps.values()) >= SAME_RESEARCH, overlaps
