from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.extractive import ExtractiveEngine
from graph.builder import ResearchGraph, build_graph
from graph.checkpointer import memory_saver
from nodes.context import Deps
from tools.corpus_files import iter_documents
from tools.local_corpus import LocalCorpus, build_index

from .support import FIXTURE_CORPUS


@pytest.fixture(scope="session")
def corpus_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = tmp_path_factory.mktemp("corpus") / "index.sqlite"
    build_index(iter_documents(FIXTURE_CORPUS), index)
    return index


@pytest.fixture
def corpus(corpus_index: Path) -> Iterator[LocalCorpus]:
    local = LocalCorpus(corpus_index)
    yield local
    local.close()


@pytest.fixture
def deps(corpus: LocalCorpus) -> Deps:
    return Deps(engine=ExtractiveEngine(), search=corpus)


@pytest.fixture
def graph() -> ResearchGraph:
    return build_graph(memory_saver())
