"""Relevance of sources to the subject, the kinds of things articles define, and drift."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.types import Command

from core.models import ResearchPlan, SearchResult
from core.urls import markdown_url, normalize_url
from engines.checks import check_draft, unfound_words
from engines.extractive import FOLLOW_UPS, ExtractiveEngine
from engines.extractive_candidates import quotable
from engines.keyphrases import key_terms, link_queries, linked_phrases
from engines.kinds import kind_of
from engines.naming import named_by_topic, subject_tokens
from engines.relevance import (
    DEVOTED,
    LINKED,
    MENTIONS,
    OFF,
    OWN,
    RELATED,
    TITLED,
    Relevance,
    group_movement,
    named_by,
    subject_article,
    topic_subject,
)
from engines.report_markdown import GAPS_SECTION, cited_sentences, sections, split_front_matter
from engines.subject import facet_asked, match_frame
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.corpus_files import iter_documents
from tools.local_corpus import LocalCorpus, build_index
from tools.text import base_form, fold, stems

from .support import page, quoted, run_graph, start

VOLCANO = page(
    "Volcano",
    "A volcano is a vent in the crust of a planet that allows hot lava and gases to escape "
    "from a magma chamber below the surface. Volcanoes are found where tectonic plates meet.",
)
LAVA = page(
    "Lava",
    "Lava is molten rock expelled from the interior of a planet onto its surface. Lava may "
    "be erupted at a volcano or through a fracture in the crust.",
)
MAGMA = page(
    "Magma",
    "Magma is the molten rock beneath the crust of a planet, held in a magma chamber. It "
    "escapes to the surface as lava, with its gases.",
)
SURFACE = page(
    "Surface",
    "A surface is the outermost boundary of an object. The surface of a lake is its top layer "
    "of water, where fish and birds meet in summer.",
)
FILM = page(
    "Volcano Nights",
    "Volcano Nights is a 1998 American drama film directed by Jane Doe. It follows a family "
    "on holiday whose hotel is cut off by a storm.",
)
ISLAND = page(
    "Mount Example",
    "Mount Example is a small island in the Pacific Ocean with a harbour and two villages. "
    "Its northern tip has an extinct volcano.",
)
PERSON = page(
    "Ada Example",
    "Ada Example was an English geologist who studied volcanoes in Iceland and Italy. She "
    "wrote the first survey of volcanoes in the North Atlantic.",
)


def test_kinds_come_from_the_definition_or_from_personal_pronouns() -> None:
    assert kind_of(FILM.content) == "work"
    assert kind_of(LAVA.content) == "substance"
    assert kind_of(PERSON.content) == "person"
    assert kind_of("The Ottoman Empire was a state that spanned three continents.") == "place"
    assert kind_of("Sleep is a state of reduced mental and physical activity.") == "process"
    # A capitalised word belongs to a name, not to the definition.
    assert kind_of("The Apollo program was the United States human spaceflight program.") == "event"
    # "founder of the X Empire" names a founder, not an empire.
    assert kind_of("Genghis Khan was the founder of the Mongol Empire. He ruled.") == "person"


def test_a_name_the_text_calls_he_or_she_is_a_person_whatever_noun_its_definition_has() -> None:
    historian = (
        "Herodotus was a Greek historian and geographer from the Greek city of Halicarnassus. "
        "He wrote the Histories, a detailed account of the Greco-Persian Wars."
    )
    assert kind_of(historian) == "person"
    actress = "Greta Garbo was a Swedish and American film actress. She starred in silent films."
    assert kind_of(actress) == "person"
    # A work by someone stays a work, though its summary tells of a "she".
    novel = (
        "Lolita is a 1955 novel written by Vladimir Nabokov. The protagonist is a professor. "
        "She is twelve years old when the story begins, and her mother rents him a room."
    )
    assert kind_of(novel) == "work"
    # A ship is "she" too, but its article names no person: not a person's article.
    ship = "The Titanic was a British ocean liner. She sank in 1912 after striking an iceberg."
    assert kind_of(ship) != "person"


def test_a_name_defined_by_a_role_is_a_person_without_pronouns() -> None:
    # Short leads never say "he" or "she": the role says it, wherever English forms one.
    scott = "Robert Falcon Scott was a British naval officer and explorer who led expeditions."
    assert kind_of(scott) == "person"
    # The head of "a film director" is the director, not the film.
    assert kind_of("Frank Capra was an Italian-born American film director.") == "person"
    assert kind_of("Sonja Henie was a Norwegian figure skater and film star.") == "person"
    assert kind_of("Joan Miró was a Catalan painter, sculptor, and ceramicist.") == "person"
    # What the role is known for, not the novels it wrote, is what follows it.
    austen = "Ada Quill was an English writer known primarily for her six novels of manners."
    assert kind_of(austen) == "person"
    assert kind_of("Edgar Degas was a French artist famous for his pastel drawings.") == "person"
    # Not a name, an adjective that looks like a role, a kind noun first: no person.
    assert kind_of("The explorer is a rover that maps the Moon.") != "person"
    assert kind_of("Nineteen Eighty-Four is a dystopian and speculative novel.") == "work"
    assert kind_of("Kievan Rus' was the first Slavic state and, later, a federation.") == "place"
    assert kind_of("Reform Judaism is a major Jewish denomination.") != "person"
    assert kind_of("National Socialism is the far-right, ultranationalist, racist ideology.") != (
        "person"
    )


def test_the_people_and_names_a_persons_first_sentence_names_are_related() -> None:
    lovelace = page(
        "Ada Lovelace",
        "Ada Lovelace was an English mathematician and writer chiefly known for work on "
        "Charles Babbage's proposed mechanical computer. She is often considered the first "
        "computer programmer.",
    )
    babbage = page(
        "Charles Babbage",
        "Charles Babbage was an English mathematician, born in London in 1791, who also "
        "reformed the post office.",
    )
    work = page("Work (physics)", "In physics, work is the energy transferred by a force.")
    writer = page("Writer", "A writer is a person who uses written words to communicate.")
    relevance = Relevance("Ada Lovelace", [lovelace, babbage, work, writer], "who was Ada Lovelace")
    # Babbage's text never names her: her lead names him, as a name (and a possessive).
    assert relevance.of(babbage) == RELATED
    # Common words of the lead are no names: "work", "writer".
    assert relevance.of(work) == OFF and relevance.of(writer) == OFF
    assert fold("Babbage's") == fold("Babbage") == "babbage"
    # A name inside the subject's own longer name is not named: "Carmen" in hers.
    kahlo = page(
        "Frida Kahlo",
        "Magdalena Carmen Frida Kahlo was a Mexican painter who married Diego Rivera. She "
        "painted many self-portraits.",
    )
    rivera = page("Diego Rivera", "Diego Rivera was a Mexican muralist. His frescoes are famous.")
    carmen = page("Carmen", "Carmen was a Spanish flamenco dancer. She toured the Americas.")
    relevance = Relevance("Frida Kahlo", [kahlo, rivera, carmen], "who was Frida Kahlo")
    assert relevance.of(rivera) >= RELATED and relevance.of(carmen) == OFF


def test_each_source_is_judged_by_how_much_it_is_about_the_subject() -> None:
    sources = [VOLCANO, LAVA, MAGMA, SURFACE, FILM, ISLAND, PERSON]
    relevance = Relevance("volcanoes", sources)
    assert relevance.article is VOLCANO
    judged = {s.title: relevance.of(s) for s in sources}
    assert judged["Volcano"] == OWN
    assert judged["Lava"] == LINKED  # the volcano article names it, and it names volcanoes
    assert judged["Magma"] == RELATED  # named by the article, and sharing its vocabulary
    assert judged["Surface"] == OFF  # named by the article, but neither matter nor naming it
    assert judged["Volcano Nights"] == OFF  # a film that takes the subject's name
    assert judged["Mount Example"] == MENTIONS  # names it once, late: that sentence only
    assert judged["Ada Example"] >= RELATED  # names it in its first sentence
    # Without the article, a title that names the subject is still about it.
    assert Relevance("volcanoes", [LAVA, page("Volcanoes of Iceland", "x y z")]).of(
        page("Volcanoes of Iceland", "x y z")
    ) in (TITLED, OWN)


def test_the_subject_article_is_not_a_thing_of_the_subject() -> None:
    sonnets = page("Shakespeare's sonnets", "William Shakespeare wrote sonnets on many themes.")
    poet = page("William Shakespeare", "William Shakespeare was an English playwright and poet.")
    assert subject_article("Shakespeare", [sonnets, poet]) is poet


def test_a_name_is_matched_word_for_word_not_by_stem() -> None:
    """The Titanic and the Titans share a stem, not a word: the sinking is the subject."""
    sinking = page(
        "Sinking of the Titanic",
        "RMS Titanic sank in the North Atlantic Ocean on 15 April 1912 after striking an iceberg.",
    )
    titans = page("Titans", "In Greek mythology, the Titans were the deities before the Olympians.")
    moon = page("Titan (moon)", "Titan is the largest moon of Saturn.")
    relevance = Relevance.of_topic("what sank the Titanic", [titans, sinking, moon])
    assert relevance.article is sinking
    assert relevance.phrase == ["titanic"]  # the name the topic gives, inside the title
    assert relevance.of(titans) == OFF and relevance.of(moon) == OFF
    assert [base_form(w) for w in ("explained", "explains", "stopped", "making", "make")] == [
        "explain",
        "explain",
        "stop",
        "mak",
        "mak",
    ]
    assert fold("countries") == "country" and fold("volcanoes") == "volcano"


def test_a_short_name_said_once_is_no_evidence() -> None:
    """ "Go" once in a Monopoly article is a square of its board, not the game."""
    chess = page("Chess", "Chess is a board game for two players on a board of 64 squares.")
    go = page("Go (game)", "Go is an abstract strategy board game for two players.")
    monopoly = page(
        "Monopoly (game)",
        "Monopoly is a board game. Players receive a salary every time they pass Go.",
    )
    weiqi = page(
        "Weiqi players",
        "Go professionals play in leagues. The best Go players study for decades.",
    )
    relevance = Relevance.of_topic("chess versus go", [chess, go, monopoly, weiqi])
    assert relevance.of(monopoly) == OFF
    assert relevance.of(weiqi) > OFF  # it says Go twice: about the game


def test_a_thing_that_bears_a_persons_name_is_not_the_person() -> None:
    """ "Edison or Tesla" asks about two men; the tesla is a unit that bears one's name."""
    tesla = page("Nikola Tesla", "Nikola Tesla was a Serbian-American engineer and inventor.")
    edison = page("Thomas Edison", "Thomas Alva Edison was an American inventor.")
    unit = page("Tesla (unit)", "The tesla is the unit of magnetic flux density in the SI.")
    pages = [unit, tesla, edison]
    relevance = Relevance.of_topic("Edison or Tesla: who did more for electricity?", pages)
    assert relevance.of(unit) == OFF
    assert relevance.of(tesla) >= TITLED and relevance.of(edison) >= TITLED
    # Asked about the unit, the unit it is.
    assert Relevance.of_topic("the tesla unit of flux density", pages).of(unit) >= TITLED


def test_links_compare_words_without_plural_endings_not_stems() -> None:
    article = page("Heart", "In humans, the heart is located between the lungs.")
    lung = page("Lung", "The lungs are the primary organs of the respiratory system.")
    humanism = page("Humanism", "Humanism is a philosophical stance.")
    linked = named_by(article, [article, lung, humanism])
    assert normalize_url(lung.url) in linked
    assert normalize_url(humanism.url) not in linked
    assert fold("vessels") == "vessel" and fold("glass") == "glass" and fold("virus") == "virus"


def test_feedback_terms_are_what_the_sources_about_the_topic_say_most() -> None:
    kidney = page(
        "Kidney",
        "The kidneys filter blood and make urine. Urine flows from the kidneys to the bladder; "
        "renal arteries bring the blood.",
    )
    bladder = page("Bladder", "The bladder stores urine from the kidneys until it is voided.")
    lava = page("Volcano", "A volcano erupts lava. Lava and volcanic ash flow down its flanks.")
    terms = key_terms(
        [kidney, bladder, lava],
        exclude=set(stems("kidneys filter blood")),
        limit=3,
        weight=lambda source: 0.0 if source is lava else 1.0,
    )
    assert {t.lower() for t in terms[:2]} == {"urine", "bladder"}, terms
    assert not {t.lower() for t in terms} & {"lava", "volcano", "erupts", "volcanic"}


def test_link_queries_are_anchored_on_the_subject_and_skip_what_is_collected() -> None:
    assert "magma chamber" in linked_phrases(VOLCANO.content)
    queries = link_queries(VOLCANO, "volcanoes", [VOLCANO, LAVA], [], 10)
    assert queries and all(q.startswith("volcanoes ") for q in queries)
    assert "volcanoes magma chamber" in queries
    assert "volcanoes lava" not in queries  # Lava is collected already
    # Compounds come before single words.
    assert queries.index("volcanoes magma chamber") < queries.index("volcanoes gases")


async def test_the_writer_quotes_sources_about_the_subject_and_lists_what_it_lacks() -> None:
    plan = ResearchPlan(
        theme="How do volcanoes erupt",
        investigation_points=["What volcanoes are", "Economic effects of volcanoes"],
        search_queries=["volcanoes"],
    )
    sources = [VOLCANO, LAVA, MAGMA, SURFACE, FILM, PERSON]
    draft = await ExtractiveEngine().write(plan, sources, None, None)
    cited = draft.partition("## References")[2]
    assert "Volcano_Nights" not in cited and "Surface" not in cited
    assert "wiki/Lava" in cited  # a source about the subject that no point chose
    assert f"## {GAPS_SECTION}" in draft
    gaps = draft.partition(f"## {GAPS_SECTION}")[2].partition("## References")[0]
    assert "- Economic effects of volcanoes" in gaps
    assert "_The collected sources do not address this point._" not in draft
    # The open questions make no claim: nothing there is counted as uncited.
    assert not any("Economic effects" in s for s, _ in cited_sentences(draft))


ERUPTIONS = ResearchPlan(
    theme="How do volcanoes erupt",
    investigation_points=["What volcanoes are"],
    search_queries=["volcanoes"],
)


def test_a_drifting_draft_cannot_pass_review() -> None:
    plan = ERUPTIONS
    sources = [VOLCANO, FILM, SURFACE]
    drifting = (
        "# Volcanoes\n\n## Executive Summary\n\n"
        "A volcano is a vent in the crust of a planet that allows hot lava and gases to escape "
        "from a magma chamber below the surface.[^1]\n\n## Key Findings\n\n"
        "- **What volcanoes are:** A surface is the outermost boundary of an object.[^2]\n\n"
        "## Detailed Analysis\n\n### What volcanoes are\n\n"
        "It follows a family on holiday whose hotel is cut off by a storm.[^3] "
        "The surface of a lake is its top layer of water, where fish and birds meet in "
        "summer.[^2]\n\n## References\n\n"
        f"[^1]: [Volcano]({VOLCANO.url})\n[^2]: [Surface]({SURFACE.url})\n"
        f"[^3]: [Volcano Nights]({FILM.url})\n"
    )
    checks = check_draft(drifting, plan, sources)
    assert checks.drifts and checks.on_subject < 0.5
    assert any(
        i.type == "logic" and "not about the subject" in i.description for i in checks.issues
    )
    # Cited to the subject's own article, the same sentences are not drift (whether that
    # article supports them is the fact check's business, not this one's).
    body = drifting.partition("## References")[0].replace("[^2]", "[^1]").replace("[^3]", "[^1]")
    on_subject = f"{body}## References\n\n[^1]: [Volcano]({VOLCANO.url})\n"
    assert check_draft(on_subject, plan, sources).on_subject == 1.0


def test_a_section_about_something_else_fails_its_heading() -> None:
    """The report as a whole keeps to the subject; one section does not, and the review says so."""
    plan = ERUPTIONS
    kept = (
        "A volcano is a vent in the crust of a planet that allows hot lava and gases to escape "
        "from a magma chamber below the surface.[^1] "
        "Volcanoes are found where tectonic plates meet.[^1] "
    )
    draft = (
        f"# Volcanoes\n\n## Executive Summary\n\n{kept}\n\n## Key Findings\n\n"
        f"- **What volcanoes are:** {kept}\n\n## Detailed Analysis\n\n"
        f"### What volcanoes are\n\n{kept}{kept.replace('A volcano', 'Each volcano')}\n\n"
        "### Where they are\n\nThe surface of a lake is its top layer of water, where fish "
        "and birds meet in summer.[^2]\n\n## References\n\n"
        f"[^1]: [Volcano]({VOLCANO.url})\n[^2]: [Surface]({SURFACE.url})\n"
    )
    checks = check_draft(draft, plan, [VOLCANO, SURFACE])
    assert not checks.drifts  # too little of the whole drifts to fail it on that alone
    stray = [i for i in checks.issues if i.location == "Where they are"]
    assert stray and "not about" in stray[0].description
    assert checks.scores.logic < 0.9


def test_urls_with_parentheses_survive_a_markdown_link() -> None:
    url = "https://en.wikipedia.org/wiki/Lift_(force)"
    assert "(" not in markdown_url(url) and ")" not in markdown_url(url)
    assert normalize_url(markdown_url(url)) == normalize_url(url)
    plan = ResearchPlan(theme="Lift", investigation_points=["What lift is"], search_queries=["x"])
    lift = SearchResult(
        title="Lift (force)",
        url=url,
        content="Lift is the force that holds an aircraft in the air as it moves forward.",
    )
    draft = (
        "# Lift\n\n## Executive Summary\n\nLift is the force that holds an aircraft in the air "
        f"as it moves forward.[^1]\n\n## References\n\n[^1]: [Lift (force)]({url})\n"
    )
    checks = check_draft(draft, plan, [lift])
    assert checks.citations.supported == 1


async def test_the_first_step_follows_what_the_subject_article_names(
    graph: ResearchGraph, deps: Deps
) -> None:
    values = await run_graph(graph, deps, "follow", start())
    plan = values["task_plan"]
    first_step = [n.query for n in values["notes"]][: len(plan.search_queries) + FOLLOW_UPS]
    follow_ups = [q for q in first_step if q not in plan.search_queries]
    assert follow_ups, "queries beyond the plan's in the first step"
    subject = match_frame(plan.theme)[1]
    assert all(q.startswith(f"{subject} ") for q in follow_ups)  # anchored on the subject


async def test_a_plan_a_human_approves_runs_as_approved(graph: ResearchGraph, deps: Deps) -> None:
    config = {"configurable": {"thread_id": "approved"}}
    async for _ in graph.astream(start(approval="plan"), config, context=deps):
        pass
    plan = (await graph.aget_state(config)).values["task_plan"]
    async for _ in graph.astream(Command(resume={"decision": "approve"}), config, context=deps):
        pass
    values = (await graph.aget_state(config)).values
    # One research round (its first draft passes): exactly the approved queries ran.
    assert len(values["drafts"]) == 1
    assert values["queries_done"] == plan.search_queries


async def test_a_pronoun_after_a_place_is_not_taken_for_the_name_it_stands_for() -> None:
    sculptor = page(
        "Donatello",
        "Donatello was an Italian sculptor of the Renaissance. Born in Florence, he studied "
        "classical sculpture and developed an Early Renaissance style of sculpture. Donatello "
        "worked in Rome, where he studied the ruins of ancient buildings for the Renaissance.",
    )
    topic = "the Renaissance"
    candidates, _ = quotable([sculptor], Relevance(match_frame(topic)[1], [sculptor], topic))
    quotes = [c.text for c in candidates]
    # The "he" is never read as Florence's: it is quoted as the sculptor, or not at all.
    assert not any(", he studied" in q for q in quotes)
    assert any(q.startswith("Born in Florence, Donatello studied classical") for q in quotes)
    assert any(q.startswith("Donatello worked in Rome, where he studied") for q in quotes)


def test_a_group_of_people_is_found_through_what_unites_them() -> None:
    movement = page(
        "Impressionism",
        "Impressionism was a 19th-century art movement characterised by visible brush strokes.",
    )
    french = page("French", "French is a Romance language spoken in France.")
    painter = page(
        "Claude Monet",
        "Claude Monet was a French painter and founder of Impressionist painting. He painted "
        "water lilies in the Impressionist manner.",
    )
    subject = "French Impressionist painters"
    assert group_movement(subject) == "Impressionism"
    assert group_movement("the Greek philosophers".removeprefix("the ")) == "Greek"
    assert group_movement("volcanoes") is None and group_movement("human heart") is None
    assert subject_article(subject, [french, movement, painter]) is movement
    relevance = Relevance(subject, [french, movement, painter])
    assert relevance.of(painter) >= RELATED  # "Impressionist" names "Impressionism", twice
    assert relevance.of(french) == OFF


def test_a_subject_without_an_article_of_its_own_gets_the_nearest_stand_in() -> None:
    power = page(
        "Nuclear power",
        "Nuclear power is the use of nuclear reactions to produce electricity. Reactors of "
        "this kind split uranium nuclei.",
    )
    weapon = page("Nuclear weapon", "A nuclear weapon is an explosive device.")
    fusion = page("Reactor (film)", "Reactor is a 2004 film about a nuclear accident.")
    assert subject_article("nuclear reactors", [weapon, fusion, power]) is power
    # One word of the subject is not enough to stand in for it.
    assert subject_article("nuclear reactors", [weapon]) is None
    assert subject_article("volcanoes", [page("Volcanic rock", "Volcanoes make it.")]) is None


def test_a_keyword_topic_gets_the_stand_in_that_uses_most_of_its_words() -> None:
    """Half its title is the subject's and it uses most of the subject's words."""
    wind = page(
        "Wind power",
        "Wind power is the use of wind energy to generate electricity. Wind turbines of "
        "many sizes turn it into current.",
    )
    garden = page("Garden", "A garden is a planned space, usually outdoors, set aside for plants.")
    storm = page("Windstorm", "A windstorm is a storm with high winds and little rain.")
    # "small" and "garden" are said by no article on wind: most words still are.
    assert subject_article("small wind turbines garden", [storm, garden, wind]) is wind
    # It is named by the words it shares with the topic, and what the topic names beside
    # them is another thing: a garden is no part of small wind turbines.
    turbine = page(
        "Turbine",
        "A turbine is a machine that turns the flow of a fluid into work. Wind turbines "
        "drive generators; steam turbines drive ships.",
    )
    shed = page(
        "Shed",
        "A shed is a small building in a garden. A garden shed keeps tools, and a garden "
        "may have several.",
    )
    topic = "small wind turbines garden"
    relevance = Relevance(topic, [storm, garden, wind, turbine, shed], topic)
    assert relevance.article is wind and relevance.phrase == subject_tokens("wind turbines")
    assert relevance.of(turbine) >= DEVOTED
    assert relevance.of(garden) == OFF and relevance.of(shed) == OFF
    # Of two that use as many of its words, the one whose title names more of them.
    steam = page(
        "Steam", "Steam is water vapour. Steam rises, steam condenses, and steam engines use it."
    )
    engine = page("Steam engine", "A steam engine burns coal.")
    assert subject_article("steam engine changed", [steam, engine]) is engine
    # A title mostly made of other words does not stand in, whatever its text uses.
    war = page(
        "Gallic Wars",
        "The Gallic Wars were waged by Julius Caesar, who built a road to conquer Gaul.",
    )
    assert subject_article("Julius Caesar, and how did he build the Roman road", [war]) is None


def test_a_subject_without_a_title_of_its_own_takes_the_article_that_says_what_it_is() -> None:
    """A sentence "A monsoon is ..." in another article makes that article the subject's own."""
    winds = page(
        "Seasonal wind",
        "Seasonal winds reverse with the seasons. A monsoon is a seasonal wind that brings "
        "heavy summer rain to South Asia.",
    )
    rain = page(
        "Rain",
        "Rain is water falling from clouds. Monsoons bring rain, and a monsoon season may "
        "last for months.",
    )
    assert subject_article("monsoons", [rain, winds]) is winds
    relevance = Relevance("monsoons", [rain, winds], "how do monsoons start")
    assert relevance.of(winds) == OWN and relevance.of(rain) < OWN
    # A sentence that only names it is no definition.
    assert subject_article("monsoons", [rain]) is None


def test_what_the_subjects_article_names_is_related_where_it_uses_a_word_of_its_name() -> None:
    """A linked source sharing less of the subject's matter counts when it says "kelp"."""
    forest = page(
        "Kelp forest",
        "A kelp forest is an underwater area with a high density of kelp. Kelp forests grow "
        "in cold coastal waters and shelter fish, sea otters and sea urchins.",
    )
    otter = page(
        "Sea otter",
        "The sea otter is a marine mammal of the North Pacific, the heaviest member of the "
        "weasel family. Its dense fur keeps it warm, as it has no blubber. Hunted for that "
        "fur, it nearly vanished by 1911. It uses stones as tools to open clams and crabs, "
        "and rests wrapped in kelp.",
    )
    urchin = page(
        "Sea urchin",
        "Sea urchins are spiny, globular echinoderms of the class Echinoidea. About 950 "
        "species live on the seabed of every ocean, in cold and warm waters, from the coastal "
        "intertidal zone to depths of 5,000 metres.",
    )
    relevance = Relevance("kelp forests", [forest, otter, urchin], "kelp forests")
    assert relevance.article is forest
    assert relevance.of(otter) == RELATED
    assert relevance.of(urchin) == OFF  # as much of the matter, but no word of the name


def test_another_instance_of_the_subject_is_not_the_subject() -> None:
    revolution = page(
        "French Revolution",
        "The French Revolution was a period of political change in France from 1789 to 1799.",
    )
    july = page(
        "July Revolution",
        "The July Revolution, also known as the French Revolution of 1830, was a second "
        "French Revolution after the first. It brought Louis Philippe to the throne.",
    )
    relevance = Relevance("French Revolution", [revolution, july])
    assert not relevance.names("The July Revolution, also known as the French Revolution of 1830.")
    assert not relevance.names("It was a second French Revolution after the first.")
    assert relevance.names("The French Revolution of France began in 1789.")
    assert relevance.of(july) == OFF


async def test_a_source_devoted_to_something_else_speaks_only_where_it_names_the_subject() -> None:
    jazz = page(
        "Jazz",
        "Jazz is a music genre that originated in New Orleans in the late 19th century. Jazz "
        "is characterized by swing and blue notes.",
    )
    bossa = page(
        "Bossa nova",
        "Bossa nova is a relaxed style of samba that originated and developed early in Rio "
        "in the late 1950s. Bossa nova was influenced by jazz harmonies. Many bossa nova "
        "songs are now jazz standards.",
    )
    plan = ResearchPlan(
        theme="the history of jazz",
        investigation_points=["Origins of jazz", "Legacy of jazz"],
        search_queries=["jazz"],
    )
    draft = await ExtractiveEngine().write(plan, [jazz, bossa], None, None)
    assert "wiki/Bossa_nova" in draft  # it names jazz: those sentences count
    # Under the points on jazz it speaks only where it names jazz; what it is on its
    # own (samba, Rio) belongs under its own title, if anywhere.
    body = split_front_matter(draft)[1]
    samba = [
        line
        for heading, text in sections(body).items()
        for line in text.splitlines()
        if "relaxed style of samba" in line and heading != "Bossa nova"
    ]
    assert all(line.startswith("- **Bossa nova:**") for line in samba), samba


TEA = page(
    "Tea",
    "Tea is an aromatic beverage prepared by pouring hot water over cured tea leaves. "
    "Tea originated in southwest China, where it was used as a medicinal drink.",
)
COFFEE = page(
    "Coffee",
    "Coffee is a beverage brewed from roasted coffee beans. Coffee plants are cultivated in "
    "over 70 countries, and coffee is one of the most traded agricultural commodities.",
)
HISTORY = page(
    "History",
    "History is the systematic study of the past. Historians study the history of peoples "
    "and states from written records; history as a discipline began in antiquity.",
)
ETHIOPIA = page(
    "Ethiopia",
    "Ethiopia is a landlocked country in the Horn of Africa. The history of Ethiopia reaches "
    "back to the kingdom of Aksum; Ethiopia was never colonised, and Ethiopia's history "
    "includes the Solomonic dynasty.",
)


def test_the_articles_a_topic_names_are_about_it_however_it_is_worded() -> None:
    sources = [TEA, COFFEE, VOLCANO]
    for topic in ("tea vs coffee", "Which is healthier, coffee or tea?", "coffee tea"):
        _, subject = match_frame(topic)
        relevance = Relevance(subject, sources, topic)
        assert relevance.of(TEA) >= TITLED and relevance.of(COFFEE) >= TITLED, topic
        assert relevance.of(VOLCANO) == OFF, topic
    # Without the topic, the subject phrase alone finds neither (a comparison's "subject").
    _, subject = match_frame("tea vs coffee")
    assert Relevance(subject, sources).of(TEA) < TITLED


def test_a_source_that_matches_one_side_of_a_comparison_well_is_not_about_the_comparison() -> None:
    lion = page(
        "Lion",
        "The lion is a large cat of the genus Panthera, ranging in Sub-Saharan Africa and India. "
        "It is sexually dimorphic; adult male lions are larger than females and have a mane.",
    )
    tiger = page(
        "Tiger",
        "The tiger is a large cat and a member of the genus Panthera native to Asia. It is "
        "classified into nine subspecies, such as the mainland Asian tiger and the Sunda tiger.",
    )
    golfer = page(
        "Tiger Woods",
        'Eldrick Tont "Tiger" Woods is an American professional golfer. He is widely regarded '
        "as one of the greatest golfers of all time. Woods holds numerous golf records.",
    )
    towns = [
        page(f"Town {i}", f"Town {i} lies in a valley by a river with a market.") for i in range(8)
    ]
    topic = "lions vs tigers"
    relevance = Relevance(match_frame(topic)[1], [lion, tiger, golfer, *towns], topic)
    assert relevance.of(lion) >= TITLED and relevance.of(tiger) >= TITLED
    assert relevance.of(golfer) <= MENTIONS, "his nickname says nothing of lions or tigers"


def test_people_are_named_by_their_surname() -> None:
    tolstoy = page(
        "Leo Tolstoy",
        "Leo Tolstoy was a Russian writer. He is regarded as one of the greatest authors; "
        "he wrote War and Peace, and his later life was devoted to his faith.",
    )
    dostoevsky = page(
        "Fyodor Dostoevsky",
        "Fyodor Dostoevsky was a Russian novelist. He wrote Crime and Punishment; his "
        "novels explore the human psyche, and he was exiled to Siberia.",
    )
    topic = "Tolstoy vs Dostoevsky"
    _, subject = match_frame(topic)
    relevance = Relevance(subject, [tolstoy, dostoevsky, VOLCANO], topic)
    assert relevance.of(tolstoy) >= TITLED and relevance.of(dostoevsky) >= TITLED
    assert relevance.of(VOLCANO) == OFF
    # A surname names a person; the last word of another title names nothing by itself.
    civil_war = page("Spanish Civil War", "The Spanish Civil War was fought from 1936 to 1939.")
    wars = "the causes of World War I"
    assert Relevance(match_frame(wars)[1], [civil_war], wars).of(civil_war) < TITLED


def test_a_yes_or_no_question_is_about_the_thing_it_asks_about() -> None:
    bee = page(
        "Bee",
        "Bees are winged insects closely related to wasps and ants, known for their roles in "
        "pollination. Bees rest at night in a state much like sleep.",
    )
    sleep = page(
        "Sleep",
        "Sleep is a state of reduced mental and physical activity in which consciousness is "
        "altered. Humans sleep about a third of their lives.",
    )
    topic = "do bees sleep"
    relevance = Relevance(match_frame(topic)[1], [sleep, bee], topic)
    assert relevance.article is bee
    assert relevance.of(sleep) < TITLED, "'sleep' is what the question asks bees do"
    coffee = page(
        "Coffee",
        "Coffee is a beverage brewed from roasted coffee beans. Coffee contains caffeine, "
        "a stimulant.",
    )
    tea = page("Tea", "Tea is an aromatic beverage prepared by pouring hot water over leaves.")
    # What is said of the subject stays in it ("bad for you"); its first word is its name.
    topic = "is coffee bad for you"
    subject = match_frame(topic)[1]
    assert subject == "coffee bad for you"
    assert Relevance(subject, [tea, coffee], topic).article is coffee


def test_a_source_that_names_only_what_a_question_asks_of_its_subject_is_not_about_it() -> None:
    plant = page(
        "Plant",
        "Plants are the eukaryotes of the kingdom Plantae. Plants make their food from light.",
    )
    pain = page(
        "Pain",
        "Pain is a distressing feeling often caused by intense or damaging stimuli. Pain "
        "motivates an animal to withdraw from damaging situations.",
    )
    gout = page(
        "Gout",
        "Gout is a form of arthritis with attacks of pain in a red, tender and swollen joint. "
        "Pain typically comes on rapidly, and the pain is worst in the big toe.",
    )
    pain_relief = page(
        "Pain management",
        "Pain management is a branch of medicine that eases suffering. Pain relief uses drugs.",
    )
    hormone = page(
        "Plant hormone",
        "Plant hormones are signal molecules produced within plants. They control how plants "
        "grow and may respond to damage much as an animal reacts to pain.",
    )
    sources = [plant, pain, gout, pain_relief, hormone]
    topic = "do plants feel pain"
    relevance = Relevance(match_frame(topic)[1], sources, topic)
    assert relevance.of(plant) == OWN
    assert relevance.of(pain) >= TITLED, "the article of what is asked: the topic names it"
    assert relevance.of(hormone) >= TITLED
    assert relevance.of(gout) < DEVOTED, "it names pain twice, and never plants"
    assert relevance.of(pain_relief) < DEVOTED, "its title names pain, and never plants"
    # Keywords say nothing of which is asked of which: each thing they name is the topic's.
    jazz = page("Jazz", "Jazz is a music genre that began in New Orleans. Jazz uses swing.")
    city = page("New Orleans", "New Orleans is a city in Louisiana on the Mississippi River.")
    player = page(
        "Louis Armstrong", "Louis Armstrong was a trumpeter of jazz. His jazz set the style."
    )
    topic = "jazz origins new orleans"
    relevance = Relevance(match_frame(topic)[1], [city, jazz, player], topic)
    assert relevance.of(player) >= DEVOTED


def test_how_come_asks_what_why_asks() -> None:
    sky = page(
        "Sky",
        "The sky is everything that lies above the surface of the Earth. The sky is blue by "
        "day because air scatters blue light.",
    )
    blue = page("Blue", "Blue is a primary colour. Blue is the colour of the clear sky.")
    blues = page("Blues", "Blues is a music genre. Blues songs are sad.")
    judged = [
        [
            Relevance(match_frame(topic)[1], [sky, blue, blues], topic).of(s)
            for s in (sky, blue, blues)
        ]
        for topic in ("why is the sky blue", "how come the sky is blue")
    ]
    assert judged[0] == judged[1]


def test_neither_the_verb_of_a_question_nor_the_place_it_is_set_in_is_its_subject() -> None:
    airplane = page(
        "Airplane",
        "An airplane is a fixed-wing aircraft propelled by a jet engine or a propeller. "
        "Airplanes fly by the lift of their wings.",
    )
    fly = page(
        "Fly",
        "A fly is an insect of the order Diptera, named for its single pair of wings. "
        "Flies fly with one pair of wings.",
    )
    topic = "how airplanes fly"
    relevance = Relevance(match_frame(topic)[1], [airplane, fly], topic)
    assert relevance.of(airplane) == OWN
    assert relevance.of(fly) < TITLED, "'fly' is what airplanes do, not the insect"
    photosynthesis = page(
        "Photosynthesis",
        "Photosynthesis is the process by which plants use light to make sugars. "
        "Photosynthesis releases the oxygen animals breathe.",
    )
    matter = page(
        "Matter",
        "In physics, matter is any substance that has mass and takes up space. "
        "Matter exists in several states.",
    )
    topic = "what is photosynthesis and why does it matter"
    relevance = Relevance(match_frame(topic)[1], [photosynthesis, matter], topic)
    assert relevance.of(photosynthesis) >= TITLED
    assert relevance.of(matter) < TITLED, "the verb of the question's second part"
    plague = page(
        "Black Death",
        "The Black Death was a plague pandemic in Europe from 1346 to 1353. "
        "It killed half of Europe's population.",
    )
    europe = page(
        "Europe",
        "Europe is a continent in the Northern Hemisphere. Europe is bordered by the Arctic "
        "Ocean. Europe's largest country is Russia.",
    )
    council = page(
        "Council of Europe",
        "The Council of Europe is an international organisation in Europe founded in 1949.",
    )
    danube = page(
        "Danube",
        "The Danube is a river in Europe. It flows through ten countries of central Europe.",
    )
    topic = "what were the effects of the Black Death in Europe"
    relevance = Relevance(match_frame(topic)[1], [plague, europe, council, danube], topic)
    assert relevance.of(plague) == OWN
    assert relevance.of(europe) < TITLED and relevance.of(council) < TITLED
    assert relevance.of(danube) == OFF
    # In a question of two parts, the place is what the second part asks about.
    renaissance = page(
        "Renaissance",
        "The Renaissance was a period of European history. The Renaissance began in Italy.",
    )
    florence = page(
        "Florence",
        "Florence is a city in Italy and the capital of Tuscany. Florence was a centre of trade.",
    )
    topic = "What was the Renaissance, and why did it start in Florence?"
    relevance = Relevance(match_frame(topic)[1], [renaissance, florence], topic)
    assert relevance.of(florence) >= TITLED
    # A setting that is no place is part of what is asked.
    karma = page("Karma", "Karma is the principle of cause and effect in Hinduism and Buddhism.")
    hinduism = page(
        "Hinduism",
        "Hinduism is an Indian religion and dharma, a way of life. "
        "Hinduism teaches karma and rebirth.",
    )
    topic = "the role of karma in Hinduism"
    relevance = Relevance(match_frame(topic)[1], [karma, hinduism], topic)
    assert relevance.of(hinduism) >= TITLED


def test_an_article_titled_by_a_common_word_of_the_topic_is_not_about_it() -> None:
    topic = "the history of Ethiopia"
    _, subject = match_frame(topic)
    relevance = Relevance(subject, [ETHIOPIA, HISTORY], topic)
    assert relevance.of(ETHIOPIA) >= TITLED
    assert relevance.of(HISTORY) < TITLED


@contextmanager
def extractive_over(tmp_path: Path, documents: list[tuple[str, str]]) -> Iterator[Deps]:
    """Deps of the extractive engine searching a local corpus of (title, text) documents."""
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"title": t, "url": f"https://example.org/{t}", "text": x}) + "\n"
            for t, x in documents
        )
    )
    build_index(iter_documents(corpus), tmp_path / "index.sqlite")
    search = LocalCorpus(tmp_path / "index.sqlite")
    try:
        yield Deps(engine=ExtractiveEngine(), search=search)
    finally:
        search.close()


async def test_a_report_whose_sources_leave_the_subject_half_unsaid_is_insufficient(
    graph: ResearchGraph, tmp_path: Path
) -> None:
    documents = [
        (
            "Car",
            "A car, or an automobile, is a motor vehicle with four wheels. Most definitions of "
            "cars say that they run primarily on roads and mainly transport people. There are "
            "over a billion cars in use worldwide, more every year.",
        ),
        ("Truck", "A truck is a motor vehicle designed to transport cargo, larger than a car."),
        (
            "Electric guitar",
            "An electric guitar is a guitar that requires external amplification to be heard.",
        ),
    ]
    with extractive_over(tmp_path, documents) as deps:
        asked = await run_graph(graph, deps, "electric", start("pros and cons of electric cars"))
        plain = await run_graph(graph, deps, "plain", start("pros and cons of cars"))
    assert asked["report_status"] == "insufficient" and "'electric'" in asked["stop_reason"]
    assert "[^1]" in asked["final_report"]  # what was found is kept, and said to fall short
    assert plain["report_status"] == "final", plain["stop_reason"]


async def test_a_facet_the_question_words_do_not_list_leaves_the_subject_covered(
    graph: ResearchGraph, tmp_path: Path
) -> None:
    """No source says "decline", but the republic is covered: the report is final."""
    documents = [
        (
            "Republic of Vesta",
            "The Republic of Vesta was a maritime state on the Ionian coast from 900 to 1400. "
            "Its merchant fleet traded salt and glass across the sea. The republic lost its "
            "colonies to a rival league in 1380, and its senate dissolved in 1400.",
        ),
        (
            "Salt trade",
            "The salt trade carried salt from coastal pans to inland markets. The Republic of "
            "Vesta taxed the salt trade heavily, and its fleet guarded the salt routes.",
        ),
    ]
    with extractive_over(tmp_path, documents) as deps:
        state = await run_graph(graph, deps, "vesta", start("the decline of the Republic of Vesta"))
    assert state["report_status"] != "insufficient", state["stop_reason"]
    assert "Republic of Vesta" in state["final_report"].partition("## References")[2]


def test_a_request_around_the_topic_leaves_no_words_unsaid() -> None:
    """The words of "I want to learn everything about" are the asker's, not the topic's."""
    vesta = page(
        "Republic of Vesta",
        "The Republic of Vesta was a maritime state on the Ionian coast from 900 to 1400. The "
        "republic lost its colonies to a rival league in 1380, and its senate dissolved in 1400.",
    )
    topic = "the decline of the Republic of Vesta"
    assert unfound_words(topic, [vesta]) == []
    for asked in (
        f"I want to learn everything about {topic}",
        f"can you explain {topic} to a child",
    ):
        assert unfound_words(asked, [vesta]) == [], asked


WHALE = page(
    "Whale",
    "Whales are a widely distributed group of fully aquatic placental marine mammals. "
    "Whales breathe air through a blowhole and feed their young on milk.",
)
SHARK = page(
    "Shark",
    "Sharks are a group of cartilaginous fishes with five to seven gill slits. Sharks "
    "have a skeleton of cartilage and rows of replaceable teeth.",
)
WHALE_SHARK = page(
    "Whale shark",
    "The whale shark is a slow-moving, filter-feeding carpet shark and the largest known "
    "fish species. The whale shark is not a whale.",
)


def test_a_name_made_of_both_parts_of_a_topic_is_a_third_thing() -> None:
    topic = "whales and sharks compared"
    sources = [WHALE_SHARK, WHALE, SHARK]
    assert subject_article(match_frame(topic)[1], sources) is not WHALE_SHARK
    relevance = Relevance.of_topic(topic, sources)
    assert relevance.of(WHALE) >= TITLED and relevance.of(SHARK) >= TITLED
    assert relevance.asked_for(WHALE) and relevance.asked_for(SHARK)
    assert not relevance.asked_for(WHALE_SHARK)
    # A title that joins its own parts is named as written.
    play = page(
        "Romeo and Juliet",
        "Romeo and Juliet is a tragedy written by William Shakespeare about two young lovers.",
    )
    assert subject_article("Romeo and Juliet", [play]) is play


LAKE = page(
    "Lake",
    "A lake is a naturally occurring, relatively large body of water on the surface of the "
    "Earth. Most lakes are fresh water, and a lake is fed and drained by rivers.",
)
POYANG = page(
    "Poyang Lake",
    "Poyang Lake is the largest freshwater lake in China. The lake is fed by the Gan, Xin and "
    "Xiu rivers and flows into the Yangtze.",
)
DRY_LAKE = page(
    "Dry lake",
    "A dry lake is a basin that formerly held a standing lake, which disappears when "
    "evaporation exceeds recharge. A dry lake is also called a playa.",
)


def test_a_lake_of_its_own_name_is_an_example_of_lakes_not_the_subject() -> None:
    sources = [LAKE, POYANG, DRY_LAKE]
    for topic in ("lakes", "how are lakes formed"):
        relevance = Relevance.of_topic(topic, sources)
        assert relevance.of(LAKE) == OWN, topic
        assert relevance.of(DRY_LAKE) >= TITLED, topic  # a kind of lake
        assert relevance.of(POYANG) == DEVOTED, topic  # one lake: an example


def test_a_title_the_topic_names_is_kept_where_other_sources_join_it_to_the_topic() -> None:
    bread = page(
        "Bread",
        "Bread is a baked food made from flour and water, usually leavened with yeast. Bread "
        "is a staple food across the world.",
    )
    yeast = page(
        "Yeast",
        "Yeast is a fungus that grows as single cells and reproduces by budding. Yeast is "
        "used in baking bread.",
    )
    fermentation = page(
        "Fermentation",
        "Fermentation is a metabolic process that produces chemical changes in organic "
        "substrates through the action of enzymes, without oxygen.",
    )
    beer = page(
        "Beer",
        "Beer is brewed by the fermentation of malted cereal grains with yeast. Fermentation "
        "by yeast makes the alcohol in beer.",
    )
    brewing = page(
        "Brewing",
        "Brewing is the production of beer by steeping a starch source in water and "
        "fermenting it with yeast.",
    )
    topic = "bread yeast fermentation"
    named = Relevance.of_topic(topic, [bread, yeast, fermentation, beer, brewing])
    assert named.asked_for(fermentation)
    # Alone, its own article names neither bread nor yeast, and nothing joins it to them.
    alone = Relevance.of_topic(topic, [bread, yeast, fermentation])
    assert not alone.asked_for(fermentation)


async def test_the_articles_a_topic_names_lead_the_plan() -> None:
    topic = "whales and sharks compared"
    great_white = page(
        "Great white shark",
        "The great white shark is a large shark of the coastal surface waters. The great "
        "white shark is the largest predatory fish.",
    )
    plan = await ExtractiveEngine().plan(topic, [great_white, WHALE_SHARK, SHARK, WHALE], None)
    assert plan.investigation_points[:2] == ["Shark", "Whale"]


async def test_a_planned_point_is_not_written_twice_under_its_singular() -> None:
    plan = ResearchPlan(
        theme="rivers vs lakes", investigation_points=["Rivers", "Lakes"], search_queries=["x"]
    )
    # More than the summary and the point "Rivers" quote: the rest would fill a "River".
    river = page(
        "River",
        "A river is a natural stream of fresh water that flows towards an ocean or a lake. "
        "Rivers are fed by rain and melting snow. A river carves valleys and canyons over "
        "time. Large rivers carry silt that builds deltas at their mouths. Some rivers "
        "flow only in the wet season. A river basin collects the water of its tributaries. "
        "Rivers were the first highways of trade. Floods of a river renew the soil of its "
        "plain. Dams hold back rivers for power and irrigation.",
    )
    draft = await ExtractiveEngine().write(plan, [river, LAKE], None, None)
    headings = list(sections(split_front_matter(draft)[1]))
    assert "Lake" not in headings and "River" not in headings, headings


def test_a_short_common_noun_is_named_in_lower_case_a_short_name_only_as_written() -> None:
    cat = page(
        "Cat",
        "The cat is a small domesticated carnivorous mammal. The cat is a member of the "
        "family Felidae, and a cat is a social species.",
    )
    dog = page(
        "Dog",
        "The dog is a domesticated descendant of the wolf. The dog was the first species "
        "domesticated, and a dog is a pack animal.",
    )
    siamese = page(
        "Siamese cat",
        "The Siamese cat is one of the first recognised breeds of domestic cat, from Thailand.",
    )
    relevance = Relevance.of_topic("cats vs dogs", [cat, dog, siamese])
    assert relevance.of(siamese) >= TITLED
    go = page(
        "Go (game)",
        "Go is an abstract strategy board game for two players. Go was invented in China.",
    )
    walk = page("Walking", "Walking is one of the main gaits of locomotion; people go on foot.")
    relevance = Relevance.of_topic("chess versus go", [go, walk])
    assert relevance.of(walk) == OFF


RELIGION = (
    "Religion",
    "Religion is a range of social-cultural systems, including designated behaviors and "
    "practices, morals, beliefs, worldviews, texts, sanctified places, prophecies and ethics. "
    "Most peoples in history have practised a religion.",
)
CHRISTIANITY = (
    "Christianity",
    "Christianity is an Abrahamic monotheistic religion based on the life of Jesus. Christianity "
    "is the religion with the most followers, and the religion of most of Europe.",
)
JAPAN = (
    "Japan",
    "Japan is an island country in East Asia. Shinto and Buddhism are the main religions of "
    "Japan. Japan has the world's eleventh-largest population.",
)
SHINTO = (
    "Shinto",
    "Shinto is a religion originating in Japan. Shinto shrines are found all over Japan, and "
    "most people in Japan take part in Shinto festivals.",
)
SAMURAI = (
    "Samurai",
    "The samurai were members of the warrior class of Japan. The samurai served the daimyo "
    "of Japan for seven centuries.",
)


def test_a_thing_in_lower_case_set_in_a_named_place_is_asked_of_the_place() -> None:
    """Religion's article names no Japan: "religion in Japan" is about Japan, and asks its
    religion; the samurai's names Japan: they stay the subject."""
    sources = [page(t, x) for t, x in (RELIGION, CHRISTIANITY, JAPAN, SHINTO, SAMURAI)]
    assert topic_subject("religion in Japan", sources) == "Japan"
    assert topic_subject("Religion in Japan", sources) == "Japan"  # as a plan's theme writes it
    assert topic_subject("could religion thrive in Japan", sources) == "Japan"
    assert topic_subject("the role of the samurai in Japan", sources) == "samurai"
    assert topic_subject("Shinto in Japan", sources) == "Shinto"  # a name, as it is written
    assert topic_subject("religion in Atlantis", sources) == "religion"  # no such place found
    assert topic_subject("poverty in Japan", sources) == "poverty"  # no article of its own
    anime = page("Anime", "Anime is animation made in Japan. Anime is popular in Japan and abroad.")
    relevance = Relevance.of_topic("religion in Japan", [*sources, anime])
    assert relevance.of(page(*SHINTO)) >= RELATED
    assert relevance.of(anime) <= MENTIONS, "of Japan, but it never says religion"


async def test_a_report_on_a_thing_in_a_place_keeps_to_the_place(
    graph: ResearchGraph, tmp_path: Path
) -> None:
    with extractive_over(tmp_path, [RELIGION, CHRISTIANITY, JAPAN, SHINTO]) as deps:
        state = await run_graph(graph, deps, "japan", start("religion in Japan"))
    cited = state["final_report"].partition("## References")[2]
    assert "Japan" in cited and "Shinto" in cited
    assert "Christianity" not in cited, "a religion of elsewhere is not religion in Japan"


def test_the_field_a_topic_asks_of_its_subject_is_no_subject_of_its_own() -> None:
    sleep = page(
        "Sleep",
        "Sleep is a state of reduced mental and physical activity. During sleep the body "
        "repairs tissue and the brain consolidates memory.",
    )
    field = page("Biology", "Biology is the scientific study of life and living organisms.")
    molecules = page(
        "Molecular biology",
        "Molecular biology is the branch of biology that studies the molecules of cells. "
        "Molecular biology grew from biochemistry and genetics.",
    )
    dream = page(
        "Dream",
        "A dream is a succession of images that occur during sleep. Dreams mainly occur in "
        "the rapid-eye-movement stage of sleep.",
    )
    sources = [sleep, field, molecules, dream]
    topic = "the biology of sleep"
    relevance = Relevance.of_topic(topic, sources)
    assert relevance.of(sleep) == OWN
    assert relevance.of(dream) >= DEVOTED
    assert relevance.of(field) >= TITLED, "the topic names it"
    assert relevance.of(molecules) < DEVOTED, "its title says biology, and it never says sleep"


def test_a_setting_in_lower_case_is_said_by_every_source_about_the_topic() -> None:
    inflation = page(
        "Inflation",
        "In economics, inflation is a general increase in the prices of goods and services. "
        "Inflation lowers the purchasing power of money.",
    )
    cosmic = page(
        "Cosmic inflation",
        "In physical cosmology, cosmic inflation is a theory of exponential expansion of "
        "space in the early universe. Inflation ended a tiny fraction of a second later.",
    )
    deflation = page(
        "Deflation",
        "In economics, deflation is a decrease in the general price level. Deflation is the "
        "opposite of inflation.",
    )
    cell = page("Cell (biology)", "The cell is the basic unit of life. Cells hold organelles.")
    muscle = page(
        "Muscle cell",
        "A muscle cell is a cell found in muscle tissue. Muscle cells contract and relax.",
    )
    organelle = page(
        "Mitochondria",
        "Mitochondria are organelles found in the cells of most eukaryotes. Mitochondria "
        "make most of the cell's supply of ATP.",
    )
    sources = [inflation, cosmic, deflation, cell, muscle, organelle]
    relevance = Relevance.of_topic("what is inflation in economics", sources)
    assert relevance.of(inflation) == OWN and relevance.of(deflation) >= RELATED
    assert relevance.of(cosmic) < DEVOTED, "it never says economics"
    relevance = Relevance.of_topic("the role of mitochondria in the cell", sources)
    assert relevance.of(organelle) == OWN and relevance.of(cell) >= TITLED
    assert relevance.of(muscle) < DEVOTED, "its title says cell, and it never says mitochondria"


def test_a_thing_compared_that_no_title_names_is_a_side_by_its_words() -> None:
    stoicism = page(
        "Stoicism",
        "Stoicism is a school of Hellenistic philosophy founded in Athens. The Stoics taught "
        "that virtue is the only good.",
    )
    founder = page(
        "Epicurus",
        "Epicurus was an ancient Greek philosopher who founded the school of Epicureanism. "
        "He taught that pleasure is the absence of pain.",
    )
    bystander = page("Athens", "Athens is the capital of Greece and a centre of philosophy.")
    relevance = Relevance.of_topic("stoicism vs epicureanism", [stoicism, founder, bystander])
    assert relevance.of(stoicism) >= TITLED
    assert relevance.of(founder) > OFF, "it names epicureanism, the other side"
    assert relevance.of(bystander) == OFF
    # The summary speaks of both sides: the founder's article stands in for the other's.
    assert relevance.asked_for(founder) and not relevance.asked_for(bystander)


def test_the_first_words_of_a_compound_name_nothing_of_it() -> None:
    bulb = page(
        "Incandescent light bulb",
        "An incandescent light bulb is an electric light that heats a filament until it "
        "glows. The light bulb was made practical by Thomas Edison.",
    )
    light = page("Light", "Light is electromagnetic radiation that the human eye can see.")
    speed = page(
        "Speed of light",
        "The speed of light in vacuum is a universal constant. Light travels at about "
        "300,000 km per second.",
    )
    edison = page(
        "Thomas Edison",
        "Thomas Edison was an American inventor known for his work on the incandescent light "
        "bulb and the phonograph.",
    )
    relevance = Relevance.of_topic("who invented the light bulb", [bulb, light, speed, edison])
    assert relevance.of(bulb) == OWN and relevance.of(edison) >= DEVOTED
    assert relevance.of(speed) < DEVOTED, "it names light, not the light bulb"


def test_an_irregular_plural_names_the_article_in_the_singular() -> None:
    leaf = page(
        "Leaf",
        "A leaf is a principal appendage of the stem of a vascular plant. Leaves are mostly "
        "green in color due to chlorophyll.",
    )
    autumn = page(
        "Autumn",
        "Autumn is one of the four temperate seasons. Its main feature is the change in "
        "colour of the leaves of deciduous trees.",
    )
    relevance = Relevance.of_topic("why do leaves change color in autumn", [autumn, leaf])
    assert relevance.article == leaf
    assert relevance.of(autumn) >= DEVOTED
    wolves = Relevance.of_topic("how do wolves hunt", [page("Wolf", "The wolf is a canine.")])
    assert wolves.article is not None and wolves.article.title == "Wolf"


def test_what_a_subject_with_no_article_of_its_own_is_of_is_the_subject() -> None:
    ottomans = page(
        "Ottoman Empire",
        "The Ottoman Empire was a state that spanned much of Southeastern Europe from the 14th "
        "century to the early 20th century.",
    )
    sultan = page(
        "Abdul Hamid II",
        "Abdul Hamid II was the 34th sultan of the Ottoman Empire. He oversaw a period of "
        "decline with rebellions.",
    )
    assert topic_subject("the decline of the Ottomans", [sultan, ottomans]) == "Ottomans"
    relevance = Relevance.of_topic("the decline of the Ottomans", [sultan, ottomans])
    assert relevance.article == ottomans
    assert relevance.of(sultan) >= DEVOTED
    # What a relative clause says was done to it, likewise.
    stones = page(
        "Stonehenge",
        "Stonehenge is a prehistoric megalithic structure on Salisbury Plain in Wiltshire, "
        "England. Stonehenge was built in several stages.",
    )
    assert topic_subject("the people who built Stonehenge", [stones]) == "Stonehenge"
    # What it is of has the article the whole would: what comes first is asked of it.
    antarctica = page(
        "Antarctica",
        "Antarctica is Earth's southernmost continent. Antarctica is covered by an ice sheet "
        "and has the coldest climate on Earth.",
    )
    tropics = page(
        "Tropical climate",
        "Tropical climate is a climate of the tropics. In the Koppen climate classification "
        "it is a non-arid climate.",
    )
    sources = [tropics, antarctica]
    assert topic_subject("the climate of Antarctica", sources) == "Antarctica"
    relevance = Relevance.of_topic("the climate of Antarctica", sources)
    assert relevance.of(tropics) < DEVOTED, "a climate, not Antarctica's"
    # An event that has an article of its own stays the subject.
    fall = page(
        "Fall of the Western Roman Empire",
        "The fall of the Western Roman Empire was the loss of central political control in "
        "the Western Roman Empire.",
    )
    rome = page("Roman Empire", "The Roman Empire was the state ruled by the Romans.")
    subject = topic_subject("the fall of the Roman Empire", [rome, fall])
    assert subject == "fall of the Roman Empire"
    # A plural "of" a place is a name where an article bears it whole.
    giza = page("Giza", "Giza is the third-largest city in Egypt. Giza lies near Cairo.")
    pyramid = page(
        "Great Pyramid of Giza",
        "The Great Pyramid of Giza is the largest of the Egyptian pyramids. It was built "
        "around 2600 BC.",
    )
    assert topic_subject("pyramids of giza", [giza, pyramid]) == "pyramids of giza"
    assert Relevance.of_topic("pyramids of giza", [giza, pyramid]).article == pyramid
    assert topic_subject("the climate of Antarctica", sources) == "Antarctica"


def test_a_name_written_with_a_possessive_is_the_subject_where_an_article_bears_it() -> None:
    war = page(
        "Hundred Years' War",
        "The Hundred Years' War was a series of conflicts between England and France. "
        "The Hundred Years' War lasted 116 years.",
    )
    giotto = page(
        "Giotto",
        "Giotto was an Italian painter. His technique had been neglected for more than two "
        "hundred years.",
    )
    assert topic_subject("the Hundred Years' War", [giotto, war]) == "Hundred Years' War"
    relevance = Relevance.of_topic("the Hundred Years' War", [giotto, war])
    assert relevance.article == war
    assert relevance.of(giotto) == OFF, "'hundred years' does not name the war"
    disease = page(
        "Alzheimer's disease",
        "Alzheimer's disease is a neurodegenerative disease. Alzheimer's disease causes dementia.",
    )
    assert topic_subject("what causes Alzheimer’s disease", [disease]) == "Alzheimer’s disease"
    # What follows the name is asked of it; a possessor with no such article keeps its own.
    assert facet_asked("Parkinson's disease symptoms", "Parkinson's disease") == "symptoms"
    napoleon = page("Napoleon", "Napoleon was Emperor of the French. Napoleon fought battles.")
    assert topic_subject("Napoleon's greatest battles", [napoleon]) == "Napoleon"


def test_a_name_a_verb_follows_is_the_subject_and_a_surname_its_bearer() -> None:
    isaac = page(
        "Isaac Newton",
        "Sir Isaac Newton was an English physicist and mathematician. Newton formulated the "
        "laws of motion and universal gravitation.",
    )
    unit = page(
        "Newton (unit)",
        "The newton is the unit of force in the International System of Units. One newton "
        "accelerates a kilogram.",
    )
    gravity = page("Gravity", "Gravity is a fundamental interaction. Newton described it.")
    sources = [unit, gravity, isaac]
    assert topic_subject("how did Newton discover gravity", sources) == "Isaac Newton"
    assert Relevance.of_topic("how did Newton discover gravity", sources).article == isaac
    napoleon = page("Napoleon", "Napoleon was Emperor of the French. Napoleon invaded Russia.")
    tsar = page(
        "Alexander I of Russia",
        "Alexander I was Emperor of Russia from 1801. He ruled during the Napoleonic Wars.",
    )
    topic = "why did Napoleon invade Russia"
    assert topic_subject(topic, [tsar, napoleon]) == "Napoleon"
    assert tsar.url not in named_by_topic(topic, [tsar, napoleon]), "Russia is no surname"
    russia = page("Russia", "Russia is a country in Eastern Europe. Russia is the largest country.")
    assert topic_subject("why did Russia invade Finland", [tsar, russia]) == "Russia"
    # The verb after the name names no article.
    polo = page("Marco Polo", "Marco Polo was a Venetian merchant. Marco Polo travelled to China.")
    travel = page(
        "Travel",
        "Travel is the movement of people between places, such as China. People travel by "
        "road and air; travel to China grew.",
    )
    relevance = Relevance.of_topic("how did Marco Polo travel to China", [travel, polo])
    assert relevance.article == polo
    assert relevance.of(travel) == OFF
    # What a possessive pronoun says the subject has is asked of it: no article of its own.
    darwin = page(
        "Charles Darwin",
        "Charles Darwin was an English naturalist. Darwin's theory of evolution by natural "
        "selection explained the diversity of life.",
    )
    theory = page(
        "Theory",
        "A theory is a set of ideas that explains something. A scientific theory explains "
        "evolution or gravity; people develop a theory over time.",
    )
    relevance = Relevance.of_topic("how did Darwin develop his theory", [theory, darwin])
    assert relevance.article == darwin
    assert relevance.of(theory) < TITLED
    # A name and a noun an article bears together stay the subject.
    amazon = page(
        "Amazon rainforest",
        "The Amazon rainforest is a moist broadleaf tropical rainforest. It covers most of "
        "the Amazon basin.",
    )
    river = page("Amazon River", "The Amazon River is the largest river by discharge.")
    topic = "how does the Amazon rainforest produce oxygen"
    assert topic_subject(topic, [river, amazon]) != "Amazon"


def test_a_noun_in_ing_is_not_the_word_it_is_made_of() -> None:
    marketing = page(
        "Marketing",
        "Marketing is the act of acquiring and retaining customers. Marketing is part of "
        "business management.",
    )
    market = page(
        "Market (economics)",
        "In economics, a market is a composition of systems where parties engage in exchange. "
        "A stock market is a market for shares.",
    )
    assert subject_article("stock market", [marketing, market]) != marketing
    king = page("King", "A king is a male monarch. Kings rule kingdoms.")
    assert subject_article("kings", [king]) == king, "a word that only ends in -ing"


def test_the_verb_a_question_says_of_its_subject_names_no_article_in_any_form() -> None:
    shakespeare = page(
        "William Shakespeare",
        "William Shakespeare was an English playwright. Shakespeare wrote Hamlet.",
    )
    reading = page(
        "Reading",
        "Reading is the process of taking in the sense of symbols. Reading is taught early.",
    )
    relevance = Relevance.of_topic("why is Shakespeare still read today", [shakespeare, reading])
    assert relevance.article == shakespeare
    assert relevance.of(reading) == OFF, "'read' is what is said of him"


async def test_a_name_before_a_plural_is_the_subject_and_the_plural_is_asked_of_it() -> None:
    stendhal = page(
        "Stendhal",
        "Marie-Henri Beyle, better known by his pen name Stendhal, was a French writer. "
        "Stendhal is best known for the novels Le Rouge et le Noir and La Chartreuse de Parme.",
    )
    novel = page(
        "Novel",
        "A novel is an extended work of narrative fiction. The novel has a long history.",
    )
    gatsby = page(
        "The Great Gatsby",
        "The Great Gatsby is a 1925 novel by F. Scott Fitzgerald. The novel is set in the "
        "Jazz Age.",
    )
    sources = [novel, gatsby, stendhal]
    assert topic_subject("stendhal novels", sources) == "stendhal"
    relevance = Relevance.of_topic("stendhal novels", sources)
    assert relevance.article == stendhal
    assert relevance.of(gatsby) == OFF, "a novel, not one of Stendhal's"
    summary = (await quoted("stendhal novels", "Works", *sources))[0]
    assert summary.startswith("Marie-Henri Beyle"), "the summary opens with the subject's article"
    # A person is named by the surname alone, and initials are no part of the name to match.
    tolkien = page(
        "J. R. R. Tolkien",
        "John Ronald Reuel Tolkien was an English writer. He wrote The Hobbit and The Lord "
        "of the Rings.",
    )
    book = page("Book", "A book is a written work of substantial length. Books are printed.")
    assert topic_subject("tolkien books", [book, tolkien]) == "tolkien"
    assert Relevance.of_topic("who was Tolkien", [book, tolkien]).article == tolkien
    # A common noun before a plural is no name: "bread yeasts" are yeasts.
    bread = page("Bread", "Bread is a staple food. Most bread is baked from a dough.")
    assert topic_subject("bread yeasts", [bread]) == "bread yeasts"


def test_what_a_topic_asks_of_its_subject_names_none_of_it() -> None:
    rembrandt = page(
        "Rembrandt",
        "Rembrandt was a Dutch painter of the Golden Age. Rembrandt's paintings include The "
        "Night Watch.",
    )
    painting = page(
        "Painting",
        "Painting is the practice of applying paint to a surface. Famous paintings hang in "
        "museums.",
    )
    oil = page(
        "Oil painting",
        "Oil painting is a method of painting with pigments bound in oil. Many famous "
        "paintings are oil paintings.",
    )
    relevance = Relevance.of_topic(
        "the most famous paintings of Rembrandt", [rembrandt, painting, oil]
    )
    assert relevance.of(painting) >= TITLED, "the topic names it"
    assert not relevance.names("Many famous paintings are oil paintings.")
    assert relevance.of(oil) == OFF, "paintings, and never Rembrandt's"
