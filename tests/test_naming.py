"""How texts name a subject and which articles a topic names: wording never decides alone."""

from core.models import ResearchPlan
from core.urls import normalize_url
from engines.extractive import ExtractiveEngine
from engines.naming import mentions, named_by_topic, spans_parts, subject_tokens, title_stems
from engines.relevance import OFF, OWN, RELATED, TITLED, Relevance, subject_article
from engines.report_markdown import sections, split_front_matter
from engines.subject import match_frame
from tools.text import content_words, stem

from .support import page, quoted

BOXER = page(
    "Muhammad Ali",
    "Muhammad Ali was an American professional boxer and activist. Muhammad Ali held the "
    "heavyweight title from 1964 to 1970.",
)
RULER = page(
    "Muhammad Ali of Egypt",
    "Muhammad Ali was an Ottoman commander who ruled Egypt from 1805 to 1848. Muhammad Ali "
    "founded a dynasty.",
)
STATESMAN = page(
    "Muhammad Ali Jinnah",
    "Muhammad Ali Jinnah was a barrister and the founder of Pakistan. Muhammad Ali Jinnah "
    "led the Muslim League.",
)
CALIPH = page(
    "Ali",
    "Ali ibn Abi Talib was the fourth caliph. He was born in Mecca, and he was a cousin of "
    "the prophet.",
)
GPS = page(
    "Global Positioning System",
    "The Global Positioning System (GPS) is a satellite-based navigation system. The Global "
    "Positioning System provides positions to users around the world.",
)
SATNAV = page(
    "Satellite navigation",
    "Satellite navigation is the use of satellites for navigation. There are four satellite "
    "navigation systems: the United States Global Positioning System (GPS), Russia's GLONASS "
    "and others. Satellite navigation gives positions to users around the world.",
)
WORK = page(
    "Work (physics)",
    "In science, work is the energy transferred to an object by a force. Work is measured in "
    "joules, and work equals force times distance.",
)


def test_a_longer_name_is_someone_else_and_a_bracketed_abbreviation_is_the_name() -> None:
    name = subject_tokens("Muhammad Ali")
    assert mentions("Muhammad Ali won the title.", name) == 1
    assert mentions("Muhammad Ali Jinnah founded Pakistan.", name) == 0
    # A name that goes on after a hyphen is another's: the admiral Yi Sun-sin is no star.
    sun = subject_tokens("Sun")
    assert mentions("The Sun is the star at the centre of the Solar System.", sun) == 1
    assert mentions("Yi Sun-sin was a Korean admiral.", sun) == 0
    # ... or after an en dash: Wolf–Rayet stars are named after two astronomers.
    wolf = subject_tokens("Wolf")
    assert mentions("The Wolf–Rayet star is hot.", wolf) == 0
    assert mentions("The wolf is a canine. A Wolf hunts in packs.", wolf) == 2
    star = page("Sun", "The Sun is the star at the centre of the Solar System.")
    admiral = page("Yi Sun-sin", "Yi Sun-sin was a Korean admiral of the Joseon period.")
    relevance = Relevance(match_frame("the Sun")[1], [star, admiral], "how big is the Sun")
    assert relevance.of(star) == OWN and relevance.of(admiral) == OFF
    gps = subject_tokens("Global Positioning System")
    assert mentions("the United States Global Positioning System (GPS), Russia's", gps) == 1


def test_words_that_shape_a_question_name_no_article() -> None:
    # "works" is how the question is asked, not what it is about.
    assert named_by_topic("how GPS works", [WORK, GPS]) == frozenset()


def test_a_person_inside_a_longer_name_is_not_the_person_asked_about() -> None:
    sources = [BOXER, CALIPH, RULER, STATESMAN]
    named = named_by_topic("who was Muhammad Ali", sources)
    assert named == {BOXER.url}
    relevance = Relevance(match_frame("who was Muhammad Ali")[1], sources, "who was Muhammad Ali")
    assert relevance.of(BOXER) == OWN
    # Namesakes are other people, however often they repeat the name.
    assert relevance.of(RULER) == OFF and relevance.of(STATESMAN) == OFF
    assert relevance.of(CALIPH) == OFF


def test_an_abbreviated_subject_finds_its_article_and_its_neighbours() -> None:
    sources = [WORK, SATNAV, GPS]
    assert subject_article("GPS", sources) is GPS
    relevance = Relevance("GPS", sources, "how GPS works")
    assert relevance.of(GPS) == OWN
    assert relevance.of(SATNAV) >= RELATED  # names it and shares its matter
    assert relevance.of(WORK) == OFF


CHESS = page(
    "Chess",
    "Chess is a board game for two players, played on a board of 64 squares. The objective "
    "of chess is to checkmate the enemy king. Chess is played by millions of people. The "
    "earliest form of chess was invented in India around the sixth century.",
)
GO = page(
    "Go (game)",
    "Go is an abstract strategy board game for two players in which the aim is to fence off "
    "more territory than the opponent. Go was invented in China more than 2,500 years ago.",
)
XIANGQI = page(
    "Xiangqi",
    "Xiangqi, commonly known as Chinese chess, is a strategy board game for two players. "
    "Xiangqi is in the same family of games as Western chess and shogi.",
)


async def test_a_comparison_writes_both_sides_and_what_names_either() -> None:
    topic = "chess versus go"
    engine = ExtractiveEngine()
    plan = await engine.plan(topic, [XIANGQI, CHESS, GO], None)
    assert plan.investigation_points[:2] == ["Chess", "Go"]
    draft = await engine.write(plan, [XIANGQI, CHESS, GO], None, None)
    body = split_front_matter(draft)[1]
    for title in ("Chess", "Go (game)", "Xiangqi"):
        assert f"[{title}](" in body, title
    assert "Go was invented in China" in body and "checkmate the enemy king" in body
    assert "Open Questions" not in sections(body)  # each side is written, none is a gap


async def test_a_point_a_human_writes_gets_the_sentences_that_speak_to_it() -> None:
    plan = ResearchPlan(
        theme="chess versus go",
        investigation_points=["Where the games were invented"],
        search_queries=["chess", "go"],
    )
    draft = await ExtractiveEngine().write(plan, [CHESS, GO, XIANGQI], None, None)
    found = sections(split_front_matter(draft)[1])
    point = found.get("Where the games were invented", "")
    finding = [line for line in found["Key Findings"].splitlines() if "invented:**" in line]
    said = [*point.split(".[^"), *finding]
    assert point.strip() or finding  # addressed, not a gap
    # Only sentences with the point's own words ("games", "invented") speak to it.
    assert all("game" in s or "invent" in s for s in said if s.strip(" \n]0123456789"))
    assert "checkmate" not in point


def test_titled_is_what_the_topic_names_even_in_a_comparison() -> None:
    relevance = Relevance(match_frame("chess versus go")[1], [CHESS, GO], "chess versus go")
    assert relevance.of(CHESS) >= TITLED and relevance.of(GO) >= TITLED


def test_a_word_of_a_longer_name_is_another_thing_but_what_follows_of_may_be_a_subject() -> None:
    revolution = page(
        "Green Revolution",
        "The Green Revolution was a period of agricultural research that raised crop yields. "
        "The Green Revolution brought high-yielding wheat and rice to farmers.",
    )
    colour = page(
        "Green",
        "Green is the colour between cyan and yellow. Green is the colour of most plants and "
        "of farmers' crops in spring.",
    )
    topic = "effects of the Green Revolution on agriculture"
    assert named_by_topic(topic, [colour, revolution]) == {revolution.url}
    effects = page(
        "Health effects of smoking tobacco",
        "Smoking tobacco has serious effects on health. Tobacco smoking causes cancer.",
    )
    tobacco = page(
        "Tobacco",
        "Tobacco is the leaves of the tobacco plant, used for smoking. Tobacco contains nicotine.",
    )
    others = [CHESS, GO, XIANGQI, GPS]  # a pool, so that the topic's words are rare in it
    named = named_by_topic("health effects of tobacco smoking", [effects, tobacco, *others])
    assert named == {effects.url, tobacco.url}
    # Only a name the topic writes as one hides its words: these are asked apart.
    smallpox = page("Smallpox", "Smallpox was an infectious disease. Vaccines ended smallpox.")
    vaccine = page("Vaccine", "A vaccine provides immunity to a disease such as smallpox.")
    both = page("Smallpox vaccine", "The smallpox vaccine was the first vaccine against smallpox.")
    named = named_by_topic("Did vaccines end smallpox?", [smallpox, vaccine, both, *others])
    assert named == {smallpox.url, vaccine.url, both.url}
    # A title the topic writes word for word outranks one it names only by inflection.
    blues = page("Blues", "Blues is a music genre. Blues uses blue notes; blues singers sing.")
    blue = page("Blue", "Blue is one of the three primary colours, between violet and cyan.")
    jazz = page("Jazz", "Jazz is a music genre from New Orleans. Jazz uses blues forms.")
    named = named_by_topic("jazz vs blues", [jazz, blues, blue, *others])
    assert named == {jazz.url, blues.url}
    # Nor is the colour about the comparison: "Blues" is not named by "blue".
    relevance = Relevance.of_topic("jazz vs blues", [jazz, blues, blue, *others])
    assert relevance.of(blues) >= TITLED and relevance.of(blue) == OFF


def test_a_title_is_named_word_for_word_not_by_a_shared_stem() -> None:
    capitalism = page("Capitalism", "Capitalism is an economic system based on private ownership.")
    capital = page("Capital (economics)", "In economics, capital goods are used in production.")
    socialism = page("Socialism", "Socialism is an economic system of social ownership.")
    volcano = page("Volcano", "A volcano is a rupture in the crust of a planet.")
    topic = "the differences between capitalism and socialism"
    named = named_by_topic(topic, [capital, capitalism, socialism, *[CHESS, GO, GPS]])
    assert named == {capitalism.url, socialism.url}  # "Capital" only shares a stem
    assert named_by_topic("how do volcanoes erupt", [volcano, CHESS, GO]) == {volcano.url}


async def test_with_nothing_about_the_topic_found_yet_each_side_of_a_comparison_is_a_point() -> (
    None
):
    city = page(
        "Capital city", "A capital city is the seat of a government. Social life there is busy."
    )
    plan = await ExtractiveEngine().plan(
        "the differences between capitalism and socialism", [city], None
    )
    assert plan.investigation_points == ["Capitalism", "Socialism"]
    assert {"capitalism", "socialism"} <= {q.casefold() for q in plan.search_queries}


def test_an_inflected_word_names_a_title_and_a_derived_one_does_not() -> None:
    sinking = page(
        "Sinking of the Titanic",
        "RMS Titanic sank in the North Atlantic Ocean on 15 April 1912 after striking an "
        "iceberg. The sinking of the Titanic killed more than 1,500 people.",
    )
    titans = page("Titans", "The Titans were the pre-Olympian gods of Greek mythology.")
    others = [CHESS, GO, XIANGQI, GPS]
    named = named_by_topic("why did the Titanic sink", [titans, sinking, *others])
    assert named == {sinking.url}  # "sink" is "sinking"; "Titanic" is not "Titans"


def test_a_word_that_modifies_the_subject_does_not_name_it() -> None:
    tide = page(
        "Tide",
        "Tides are the periodic rise and fall of sea level caused by the Moon and the Sun. "
        "Tides are measured by tide gauges.",
    )
    ocean = page(
        "Ocean",
        "The ocean is the body of salt water that covers most of the Earth. Its sea level "
        "rises and falls with the tides that the Moon and the Sun raise.",
    )
    indian = page(
        "Indian Ocean",
        "The Indian Ocean is the third-largest ocean. The Indian Ocean borders Asia and Africa.",
    )
    river = page("Zambezi", "The Zambezi is a river. The Zambezi flows into the Indian Ocean.")
    sources = [tide, ocean, indian, river, CHESS, GO, GPS]
    relevance = Relevance("ocean tides", sources, "how do ocean tides work")
    assert relevance.of(tide) == OWN and relevance.of(ocean) >= TITLED  # the topic names both
    assert relevance.of(indian) < TITLED and relevance.of(river) == OFF
    assert not relevance.names("The Zambezi flows into the Indian Ocean.")


async def test_an_article_that_only_names_the_subject_lends_what_it_is_and_what_it_says_of_it() -> (
    None
):
    tide = page(
        "Tide",
        "Tides are the periodic rise and fall of sea level caused by the Moon and the Sun.",
    )
    sea = page(
        "Sea of Japan",
        "The Sea of Japan is the marginal sea between the Japanese archipelago and Korea. "
        "The sea has no large islands, bays or capes. Like the Mediterranean, it has almost no "
        "tides due to its enclosure. Its weak tides barely change the sea level. Few rivers "
        "discharge into the sea.",
    )
    claims = await quoted("how do ocean tides work", "Sea of Japan", tide, sea)
    assert any(c.startswith("The Sea of Japan is the marginal sea") for c in claims), claims
    assert not any("large islands" in c or "Few rivers" in c for c in claims), claims


def test_a_person_the_topic_names_is_named_by_a_surname_no_one_else_collected_bears() -> None:
    tolstoy = page(
        "Leo Tolstoy",
        "Leo Tolstoy was a Russian writer. He wrote War and Peace, and he is regarded as one "
        "of the greatest authors.",
    )
    dostoevsky = page(
        "Fyodor Dostoevsky",
        "Fyodor Dostoevsky was a Russian novelist. He wrote Crime and Punishment, and he "
        "explored the human psyche.",
    )
    topic = "Tolstoy vs Dostoevsky"
    relevance = Relevance(match_frame(topic)[1], [tolstoy, dostoevsky, CHESS, GO], topic)
    assert relevance.names("In 1880 Dostoevsky finished The Brothers Karamazov.")
    assert relevance.names("When Tolstoy died, crowds gathered at the station.")
    assert not relevance.names("Anna Dostoevsky kept her husband's papers.")
    marie = page(
        "Marie Curie",
        "Marie Curie was a Polish physicist. She won two Nobel Prizes, and she discovered radium.",
    )
    pierre = page(
        "Pierre Curie",
        "Pierre Curie was a French physicist. He shared the Nobel Prize, and he studied magnetism.",
    )
    relevance = Relevance("Marie Curie", [marie, pierre, CHESS, GO], "who was Marie Curie")
    assert relevance.names("Marie Curie won the prize.")
    assert not relevance.names("Curie studied the magnetism of crystals.")  # Pierre's, or hers?


async def test_a_comparison_puts_what_speaks_of_both_sides_at_once_side_by_side() -> None:
    games = page(
        "Board game",
        "A board game is a game played with pieces on a board. Go and chess are both played "
        "by two players, but Go has no pieces that move once placed. Board games are old.",
    )
    claims = await quoted("chess versus go", "Chess", CHESS, GO, games)
    draft_says_both = [c for c in claims if "Go" in c and "chess" in c]
    assert draft_says_both, claims
    plan = await ExtractiveEngine().plan("chess versus go", [CHESS, GO, games], None)
    draft = await ExtractiveEngine().write(plan, [CHESS, GO, games], None, None)
    assert "Chess and go side by side" in draft
    alone = await ExtractiveEngine().write(
        plan.model_copy(update={"theme": "chess and go"}), [CHESS, GO, games], None, None
    )
    assert "side by side" not in alone  # two things asked about, not compared


def test_a_coordination_names_each_of_its_members() -> None:
    mythology = subject_tokens("Greek mythology")
    curie = subject_tokens("Marie Curie")
    assert mentions("Zeus is a god of ancient Greek religion and mythology.", mythology) == 1
    assert mentions("Radium was found by Marie and Pierre Curie in 1898.", curie) == 1
    # Other words between them are not a coordination.
    assert mentions("A Greek poet wrote of mythology.", mythology) == 0
    assert mentions("Marie met the Curie family in Paris.", curie) == 0


def test_with_no_article_of_its_own_each_side_of_a_comparison_has_its_neighbours() -> None:
    kasparov = page(
        "Garry Kasparov",
        "Garry Kasparov is a Russian grandmaster who was World Chess Champion from 1985 to "
        "2000. Kasparov played chess against the computer Deep Blue in 1997. Chess engines "
        "now beat every player.",
    )
    insects = page(
        "Pupa",
        "Insects that go through a pupal stage go through four stages. A pupa does not feed.",
    )
    extra = page(
        "Weiqi players",
        "Professional players of Go (game) train from childhood in China, Japan and Korea.",
    )
    topic = "chess versus go"
    sources = [CHESS, GO, XIANGQI, kasparov, insects, extra, GPS]
    relevance = Relevance(match_frame(topic)[1], sources, topic)
    assert relevance.article is None  # neither side's title is the subject
    assert relevance.of(kasparov) > OFF  # names Chess twice: about one side
    assert relevance.of(insects) == OFF  # "go through" is not the game
    # Each side's article is followed: both get link queries, in turn.
    queries = relevance.link_queries(sources, (), 4)
    assert any(q.startswith("Chess ") for q in queries)
    assert any(q.startswith("Go ") for q in queries)


def test_a_number_tells_two_titles_apart() -> None:
    third, fifth = "Symphony No. 3 (Beethoven)", "Symphony No. 5 (Beethoven)"
    assert title_stems(third) != title_stems(fifth)
    assert "3" in content_words("the Symphony No. 3 in E-flat major")


def test_a_common_noun_written_as_a_name_is_another_thing() -> None:
    penguin = page(
        "Penguin",
        "Penguins are flightless sea birds of the Southern Hemisphere. Most penguins feed on "
        "krill and fish caught while swimming underwater.",
    )
    batman = page(
        "Batman",
        "Batman is a superhero. His foes include the Joker and the Penguin. The Penguin is a "
        "crime boss of Gotham City.",
    )
    birds = page(
        "Bird",
        "Birds are feathered animals. Some birds, such as penguins and ostriches, cannot fly.",
    )
    sources = [penguin, batman, birds, GPS]
    relevance = Relevance(match_frame("penguins")[1], sources, "penguins")
    assert relevance.common
    assert relevance.of(batman) == OFF  # the villain is named, not the bird
    assert relevance.names(birds.content.split(". ")[1])
    assert relevance.names("Penguins live in colonies.")  # a sentence's first word
    # A plural closing a name is a team's or a group's; a singular is one of a kind.
    assert not relevance.names("Their rivals, the Pittsburgh Penguins, won the Cup.")
    assert relevance.names("It won. Penguins watched.")  # a new sentence opens with it
    galaxy = page("Galaxy", "A galaxy is a system of stars. Most galaxies hold a black hole.")
    triangulum = page("Triangulum Galaxy", "The Triangulum Galaxy is a spiral galaxy near us.")
    relevance = Relevance(match_frame("what is a galaxy")[1], [galaxy, triangulum], "galaxy")
    assert relevance.names("Its neighbour, the Triangulum Galaxy, is smaller.")
    # A name stays a name: "Go" is always capitalised, so it is not common.
    chess_go = Relevance("Go", [GO, CHESS], "Go")
    assert not chess_go.common


def test_a_name_the_topic_writes_whole_is_named_whatever_its_matter() -> None:
    """The steam engine and the Industrial Revolution share few words; the topic names both.

    "Revolution", a common noun its article writes in lower case, is not what the topic's
    capitalised "Revolution" names.
    """
    engine = page("Steam engine", "A steam engine is a heat engine that performs work using steam.")
    era = page(
        "Industrial Revolution",
        "The Industrial Revolution was a transitional period of the global economy toward "
        "efficient manufacturing processes, beginning in Great Britain around 1760.",
    )
    revolution = page(
        "Revolution",
        "In political science, a revolution is a rapid, fundamental transformation of a "
        "society's structures; revolutions change the political regime.",
    )
    topic = "how did the steam engine change the Industrial Revolution?"
    named = named_by_topic(topic, [engine, era, revolution])
    assert named == {normalize_url(engine.url), normalize_url(era.url)}


def test_a_title_spans_the_parts_of_a_topic_only_when_no_part_holds_it_whole() -> None:
    assert spans_parts("Whale shark", "whales and sharks compared")
    assert not spans_parts("Whale", "whales and sharks compared")
    assert not spans_parts(
        "Internal combustion engine", "steam engine vs internal combustion engine"
    )
    assert not spans_parts("Romeo and Juliet", "Romeo and Juliet")
    assert not spans_parts("Bread", "bread yeast fermentation")


async def test_a_movement_is_named_by_its_followers_word_not_by_its_root() -> None:
    existentialism = subject_tokens("existentialism")
    assert subject_tokens("existentialists") == existentialism
    assert subject_tokens("social") != subject_tokens("socialism")
    # Of meaning, a follower is of the movement's family; a verb in "-sist" is no follower.
    assert stem("existentialists") == stem("existentialism")
    assert stem("consists") == stem("consisted") == "consist"
    first = "Kierkegaard is widely considered to be the first existentialist philosopher."
    logic = "Logicians contrast universal and existential propositions in their treatises."
    assert mentions(first, existentialism) == 1
    assert mentions(logic, existentialism) == 0
    movement = page(
        "Existentialism",
        "Existentialism is a family of philosophical views on the struggle to lead an "
        "authentic life.",
    )
    philosopher = page(
        "Søren Kierkegaard",
        f"Søren Kierkegaard was a Danish theologian and poet. {first}",
    )
    proposition = page("Proposition", f"A proposition is what a sentence asserts. {logic}")
    said = await quoted(
        "what is existentialism", "Existentialism", movement, philosopher, proposition
    )
    assert first in said and logic not in said


def test_the_head_of_a_part_a_topic_joins_to_another_is_named_whatever_its_words() -> None:
    douglass = page(
        "Frederick Douglass",
        "Frederick Douglass was an American social reformer, abolitionist, orator and writer. "
        "Frederick Douglass escaped from Maryland in 1838.",
    )
    slavery = page(
        "Slavery",
        "Slavery is the ownership of a person as property. Slavery typically involves "
        "compulsory work.",
    )
    warming = page(
        "Eugenius Warming",
        "Eugenius Warming was a Danish botanist. He was a founder of ecology.",
    )
    reef = page("Coral reef", "A coral reef is an underwater ecosystem. Coral reefs bleach.")
    topic = "Frederick Douglass and the fight against slavery"
    assert named_by_topic(topic, [douglass, slavery]) == {douglass.url, slavery.url}
    # Not a person whose surname only the part writes.
    named = named_by_topic("coral reefs and ocean warming", [reef, warming])
    assert warming.url not in named
