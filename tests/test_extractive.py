import re

import pytest

from core.models import ResearchPlan, SearchResult
from engines.checks import check_draft
from engines.extractive import ExtractiveEngine
from engines.extractive_candidates import quotable
from engines.keyphrases import named_entities
from engines.question_form import answers_asked, says
from engines.relevance import Relevance, subject_article
from engines.report_markdown import GAPS_SECTION, cited_sentences, split_front_matter
from engines.sentences import split_sentences
from engines.subject import facet_asked, match_frame

from .support import page, quoted

PRESS = SearchResult(
    title="Printing press",
    url="https://example.org/press",
    content=(
        "A printing press is a mechanical device for applying pressure to an inked surface. "
        "It was invented by Johannes Gutenberg in Mainz around 1440. "
        "The printing press spread to over two hundred European cities by 1500. "
        "This made books cheaper."
    ),
    relevance_score=1.0,
)
GUTENBERG = SearchResult(
    title="Johannes Gutenberg",
    url="https://example.org/gutenberg",
    content=(
        "Johannes Gutenberg was a German goldsmith who introduced the printing press to Europe. "
        "He printed the Gutenberg Bible in Mainz around 1455, the first major book printed with the printing press."
    ),
    relevance_score=0.8,
)
COPY = SearchResult(
    title="Mirror of Printing press",
    url="https://mirror.example/press",
    content="A printing press is a mechanical device for applying pressure to an inked surface.",
    relevance_score=0.7,
)
STEAM = SearchResult(
    title="Steam engine",
    url="https://example.org/steam",
    content="A steam engine performs mechanical work using steam as its working fluid.",
    relevance_score=0.5,
)


@pytest.mark.parametrize(
    ("topic", "frame", "subject"),
    [
        ("history of the printing press", "history", "printing press"),
        ("Causes of the French Revolution?", "causes", "French Revolution"),
        ("effects of climate change", "effects", "climate change"),
        ("how does photosynthesis work", "how", "photosynthesis"),
        # A plural last is the verb's object: the verb is the word before it.
        ("how does the brain store memories", "how", "brain"),
        # After a copula, an adverb or a participle opens what is said of the subject.
        ("why is Shakespeare still read today", "why", "Shakespeare"),
        ("why is the Mona Lisa so famous", "why", "Mona Lisa"),
        ("why was the Titanic considered unsinkable", "why", "Titanic"),
        ("is climate change caused by humans", "yes-no", "climate change"),
        ("why do we still use the QWERTY keyboard", "why", "QWERTY keyboard"),
        ("why did the Qing dynasty fall", "why", "Qing dynasty"),
        ("photosynthesis", "overview", "photosynthesis"),
        # A question answered yes or no: its subject follows the auxiliary, and ends before
        # what is said of it (an article, a plural, a verb).
        ("do bees sleep", "yes-no", "bees"),
        ("is Pluto a planet", "yes-no", "Pluto"),
        ("why is the Sahara a desert", "why", "Sahara"),
        ("can dogs eat chocolate", "yes-no", "dogs"),
        ("is nuclear power safe", "yes-no", "nuclear power"),
        ("does the moon have a dark side?", "yes-no", "moon"),
        ("why does the moon have a dark side", "why", "moon"),
        # A measure asked before the auxiliary: the subject follows it.
        ("how big is the sun", "how", "sun"),
        ("how many moons does Jupiter have", "how", "Jupiter"),
        ("how tall are giraffes", "how", "giraffes"),
        ("how vaccines are made", "how", "vaccines"),
        ("how the pyramids were built", "how", "pyramids"),
        # A measure is a word that is no past participle; before one, the subject comes first.
        ("how fast is light", "how", "light"),
        ("how paper is made", "how", "paper"),
        # A pronoun is no subject: what its verb is done to is, or what follows "there".
        ("should I drink coffee", "yes-no", "coffee"),
        ("is it safe to eat raw fish", "yes-no", "raw fish"),
        ("is there life on Mars", "yes-no", "life"),
        ("why do we dream", "why", "dream"),
        ("why do we have leap years", "why", "leap years"),  # "have" is the verb here
        ("how has medicine changed over time", "how", "medicine"),  # ... and an auxiliary
        ("how has the united states changed", "how", "united states"),
        # "what was X like" asks for a description of X: "like" is no part of it.
        ("what was life like in ancient Rome", "overview", "life"),
        ("what are cats like as pets", "overview", "cats"),
        # A verb in the past ends the subject; "during" places what happens.
        ("how Galileo used the telescope", "how", "Galileo"),
        ("what happens during a solar eclipse", "what", "solar eclipse"),
        ("how to grow tomatoes", "how", "tomatoes"),
        ("what would happen if the moon disappeared", "what-if", "moon"),
        ("what happens if you don't sleep", "what-if", "sleep"),
        ("what's a black hole", "overview", "black hole"),
        # Facets in the plural, and what a phrase is about, wrap the subject; names stay whole.
        ("key ideas of stoicism", "overview", "stoicism"),
        ("Key ideas of stoicism", "overview", "stoicism"),  # as the plan's theme writes it
        ("the main features of Gothic architecture", "overview", "Gothic architecture"),
        ("top facts about the Eiffel Tower", "overview", "Eiffel Tower"),
        ("the science behind rainbows", "overview", "rainbows"),
        ("Houses of Parliament", "overview", "Houses of Parliament"),
        ("Much Ado About Nothing", "overview", "Much Ado About Nothing"),
        ("statue of liberty", "overview", "statue of liberty"),
        ("famous paintings by Van Gogh", "overview", "Van Gogh"),
        # What is asked of any one of a kind: the kind is the subject.
        ("the life cycle of a star", "overview", "star"),
        ("the parts of a flower", "overview", "flower"),
        # "how come" asks why; a verb's particle is no part of the subject.
        ("how come the sky is blue", "how", "sky"),
        ("where does rain come from", "why", "rain"),
        ("how does a plane take off", "how", "plane"),
        # A request around the topic is no part of it; a noun that could be a verb stays.
        ("tell me everything about the Roman Colosseum", "overview", "Roman Colosseum"),
        ("can you explain how vaccines work", "how", "vaccines"),
        ("write a report on climate change", "overview", "climate change"),
        ("explain photosynthesis simply", "overview", "photosynthesis"),
        ("please research the history of tea", "history", "tea"),
        ("research methods in psychology", "overview", "research methods"),
    ],
)
def test_topic_frames_find_the_subject(topic: str, frame: str, subject: str) -> None:
    found, found_subject = match_frame(topic)
    assert (found.name, found_subject) == (frame, subject)


@pytest.mark.parametrize(
    ("topic", "facet"),
    [
        ("the biology of sleep", "biology"),
        ("what is the biology of sleep", "biology"),
        ("the life cycle of a star", "life cycle"),
        ("common myths about the Middle Ages", "common myths"),
        ("key ideas of stoicism", "key ideas"),
        ("tell me about the structure of DNA", "structure"),
        ("Napoleon's greatest battles", "greatest battles"),  # what a possessor has
        # A question's shape asks its own way; a name is no facet of anything.
        ("the history of jazz", ""),
        ("who was Ada Lovelace", ""),
        ("statue of liberty", ""),
    ],
)
def test_what_a_phrase_asks_of_its_subject_is_the_words_around_it(topic: str, facet: str) -> None:
    assert facet_asked(topic) == facet


async def test_the_plan_draws_its_points_from_what_the_first_results_are_about() -> None:
    plan = await ExtractiveEngine().plan(
        "history of the printing press", [STEAM, GUTENBERG, PRESS], None
    )
    assert plan.theme == "History of the printing press"
    # The subject's own article first, then what the results about it are about; the
    # steam engine, though found, is about something else.
    assert plan.investigation_points == ["Printing press", "Johannes Gutenberg"]
    assert plan.search_queries[0] == "printing press"
    assert "Johannes Gutenberg" in plan.search_queries
    assert len(plan.search_queries) <= 8
    assert all(len(q) < 100 for q in plan.search_queries), "planner queries stay short"


async def test_a_rejected_plan_takes_the_feedback_as_a_new_point() -> None:
    plan = await ExtractiveEngine().plan(
        "history of the printing press", [], "Focus on movable type in Korea"
    )
    assert plan.investigation_points[-1] == "Focus on movable type in Korea"
    assert "printing press Focus movable type Korea" in plan.search_queries


def test_sentences_split_after_abbreviations_and_initials_only_where_they_end() -> None:
    text = "J. R. R. Tolkien was born in 1892. He wrote e.g. The Hobbit. Printing began c. 1440 in Mainz."
    assert split_sentences(text) == [
        "J. R. R. Tolkien was born in 1892.",
        "He wrote e.g. The Hobbit.",
        "Printing began c. 1440 in Mainz.",
    ]
    # A lower-case letter before the full stop is a unit, not an initial.
    assert split_sentences("Its summit is 3,776 m. It is the highest peak in Japan.") == [
        "Its summit is 3,776 m.",
        "It is the highest peak in Japan.",
    ]
    # A work's number: "Op. 55" and "Nos. 1-3" go on.
    assert split_sentences(
        "The Symphony No. 3 in E major, Op. 55, is a symphony. It has four movements."
    ) == [
        "The Symphony No. 3 in E major, Op. 55, is a symphony.",
        "It has four movements.",
    ]


def test_a_sentence_too_long_to_be_one_is_split_where_a_full_stop_was_lost() -> None:
    first = (
        "Stoicism is a philosophical movement and practical guide to living, emphasizing daily "
        "self-discipline and moral improvement, which originated in the Hellenistic period of "
        "ancient Greece and proliferated well into the Roman Imperial period"
    )
    second = (
        "The ancient Stoics believed that the universe operated according to reason, or logos, "
        "providing a unified account of the world, constructed from ideals of rational "
        "discourse, monistic physics, and naturalistic ethics."
    )
    assert split_sentences(f"{first} {second}") == [first, second]
    # A short one stays whole: "He" and "The" here are no sentence's first word.
    short = "Helium has symbol He and atomic number 2, headed The unanimous list of gases."
    assert split_sentences(short) == [short]


def test_names_are_found_in_the_sources_but_not_the_subject() -> None:
    names = named_entities([GUTENBERG, PRESS], exclude={"print", "press"}, limit=5)
    assert "Gutenberg Bible" in names
    assert "Mainz" in names
    assert all("printing press" not in n.lower() for n in names)


async def test_written_sentences_are_quotes_with_resolved_pronouns_and_no_dangling_ones() -> None:
    plan = await ExtractiveEngine().plan("history of the printing press", [PRESS, GUTENBERG], None)
    draft = await ExtractiveEngine().write(plan, [PRESS, GUTENBERG, COPY, STEAM], None, None)
    claims = [sentence for sentence, _ in cited_sentences(draft)]
    assert any(
        c.startswith("The printing press was invented by Johannes Gutenberg") for c in claims
    ), "'It' became the article's subject"
    assert not any(c.startswith("This made") for c in claims), (
        "a sentence leaning on the previous one is not quoted"
    )
    assert sum("mechanical device for applying pressure" in c for c in claims) == 1, (
        "the mirrored sentence appears once"
    )
    assert "steam" not in draft.lower(), "an off-topic source is never cited"
    checks = check_draft(draft, plan, [PRESS, GUTENBERG, COPY, STEAM])
    assert checks.scores.fact_check == 1.0


async def test_a_draft_without_sources_says_so_instead_of_inventing() -> None:
    plan = ResearchPlan(
        theme="Printing press", investigation_points=["Origins"], search_queries=["printing press"]
    )
    draft = await ExtractiveEngine().write(plan, [], None, None)
    _, body = split_front_matter(draft)
    assert "[^" not in body
    review = await ExtractiveEngine().review(draft, plan, [])
    assert not review.approved
    assert review.suggested_action == "research"


async def test_a_category_noun_becomes_the_subject_only_when_the_lead_defines_it() -> None:
    painting = SearchResult(
        title="Liberty Leading the People",
        url="https://example.org/liberty",
        content="Liberty Leading the People is a painting by Eugène Delacroix commemorating the July Revolution of 1830. The painting is sometimes thought to depict the French Revolution.",
    )
    inventor = SearchResult(
        title="Johannes Gutenberg",
        url="https://example.org/gutenberg",
        content="Johannes Gutenberg was a German inventor who invented the movable-type printing press. The printing press later spread across the world.",
    )
    claims = await quoted("French Revolution", "Depictions", painting)
    assert (
        "Liberty Leading the People is sometimes thought to depict the French Revolution." in claims
    )
    claims = await quoted("printing press", "Spread", inventor)
    assert "The printing press later spread across the world." in claims


async def test_sentences_whose_pronoun_names_nobody_in_them_are_not_quoted() -> None:
    clemenceau = SearchResult(
        title="Georges Clemenceau",
        url="https://example.org/clemenceau",
        content=(
            "Georges Clemenceau was a French statesman during World War I. "
            "A physician turned journalist, he played a central role in World War I politics. "
            "Clemenceau led France through the last year of World War I and his government signed the peace."
        ),
    )
    claims = await quoted("World War I", "Politics", clemenceau)
    assert not any("he played" in c for c in claims)
    assert any(c.startswith("Clemenceau led France") for c in claims)


async def test_they_is_the_plural_the_lead_opens_with_and_the_category_noun_is_the_subject() -> (
    None
):
    beatles = SearchResult(
        title="The Beatles",
        url="https://example.org/beatles",
        content=(
            "The Beatles were an English rock band formed in Liverpool in 1960. "
            "The band comprised John Lennon, Paul McCartney, George Harrison and Ringo Starr. "
            "They are regarded as the most influential band in popular music history."
        ),
    )
    claims = await quoted("the Beatles", "Influence on popular music", beatles)
    assert (
        "The Beatles comprised John Lennon, Paul McCartney, George Harrison and Ringo Starr."
        in (claims)
    )
    assert "The Beatles are regarded as the most influential band in popular music history." in (
        claims
    )
    kidney = SearchResult(
        title="Kidney",
        url="https://example.org/kidney",
        content=(
            "In humans, the kidneys are two bean-shaped blood-filtering organs of the body. "
            "They receive blood from the paired renal arteries of the abdominal aorta."
        ),
    )
    claims = await quoted("the kidneys", "Blood supply", kidney)
    assert "The kidneys receive blood from the paired renal arteries of the abdominal aorta." in (
        claims
    )
    arena = SearchResult(
        title="Colosseum",
        url="https://example.org/colosseum",
        content=(
            "The Colosseum is an elliptical amphitheatre in the centre of the city of Rome. "
            "They fought wild animals in the Colosseum arena before large crowds."
        ),
    )
    claims = await quoted("the Colosseum", "Games in the Colosseum", arena)
    assert not any("fought wild animals" in c for c in claims), "a singular lead: who are they?"


async def test_a_he_after_an_opening_clause_is_the_person_the_article_is_about() -> None:
    ali = SearchResult(
        title="Muhammad Ali",
        url="https://example.org/ali",
        content=(
            "Muhammad Ali was an American professional boxer and activist. "
            "He held the world heavyweight boxing title from 1964 to 1970. "
            "In 1999, he was named Sportsman of the Century by the boxing press. "
            "At the Rome Olympics in 1960, he won the light heavyweight boxing gold medal. "
            "His trainer Angelo Dundee worked with many famous boxing champions. "
            "In his later years, he coached young boxing students in Louisville. "
            "During his long boxing career, Ali fought in many countries around the world."
        ),
    )
    claims = await quoted("Muhammad Ali", "Boxing career", ali)
    assert "In 1999, Muhammad Ali was named Sportsman of the Century by the boxing press." in claims
    # Whatever the opening clause names, the "he" after it is the article's person.
    candidates, _ = quotable([ali], Relevance("Muhammad Ali", [ali], "Muhammad Ali"))
    assert "At the Rome Olympics in 1960, Muhammad Ali won the light heavyweight boxing gold " in (
        " ".join(c.text for c in candidates)
    )
    # The sentence before speaks of his trainer: this "he" may be the trainer.
    assert not any("later years" in c for c in claims)
    # A "his" in the opening clause is the name's right after it.
    assert any(c.startswith("During his long boxing career, Ali fought") for c in claims)


def test_this_and_a_noun_the_sentence_before_named_read_as_that_noun_phrase() -> None:
    amazon = SearchResult(
        title="Amazon rainforest",
        url="https://example.org/amazon",
        content=(
            "The Amazon rainforest is a moist broadleaf tropical rainforest that covers most of "
            "the Amazon basin of South America. "
            "This basin encompasses 7 million square kilometres of land across the continent. "
            "This region includes territory belonging to nine nations and many peoples. "
            "This led to the creation of several national parks inside the rainforest. "
            "These forests hold the largest share of the remaining tropical rainforest."
        ),
    )
    candidates, _ = quotable(
        [amazon], Relevance("Amazon rainforest", [amazon], "Amazon rainforest")
    )
    texts = [c.text for c in candidates]
    assert (
        "The Amazon basin encompasses 7 million square kilometres of land across the continent."
        in texts
    )
    # No "region" before it, a verb after "This", a noun named before only in a plural:
    # what they stand for is not written there, and they are not quoted.
    assert not any(t.startswith(("This", "These", "The region", "The led")) for t in texts), texts


async def test_world_war_two_is_not_world_war_one() -> None:
    ww2 = SearchResult(
        title="World War II",
        url="https://example.org/ww2",
        content="World War II was a global conflict from 1939 to 1945 fought by the Allies and the Axis powers.",
    )
    plan = ResearchPlan(
        theme="World War I", investigation_points=["Overview"], search_queries=["x"]
    )
    draft = await ExtractiveEngine().write(plan, [ww2], None, None)
    assert "[^" not in split_front_matter(draft)[1]


WHOLE = "the whole topic"


@pytest.mark.parametrize(
    ("topic", "frame", "subject"),
    [
        ("how do bees make honey", "how", "bees"),
        ("how the internet works", "how", "internet"),
        ("how glaciers shape valleys", "how", "glaciers"),
        ("what caused the Irish famine", "causes", "Irish famine"),
        ("who was Ada Lovelace?", "person", "Ada Lovelace"),
        ("the life and times of Cleopatra", "person", "Cleopatra"),
        ("the life and music of Johann Sebastian Bach", "person", "Johann Sebastian Bach"),
        ("pros and cons of social media", "overview", "social media"),
        ("The benefits and risks of nuclear power", "overview", "nuclear power"),
        ("the causes and effects of acid rain", "causes", "acid rain"),
        ("the rise and fall of the Roman Republic", "history", "Roman Republic"),
        ("the invention of the steam engine", "history", "steam engine"),
        ("the chemistry of cooking", "overview", "cooking"),
        ("tea in China", "overview", "tea"),
        ("Galileo's trial", "overview", "Galileo"),
        # A question of any shape: the verb or auxiliary goes, and what is asked about stays.
        ("why did the Ming dynasty fall", "why", "Ming dynasty"),
        ("why are glaciers shrinking", "why", "glaciers"),
        ("why did Pompeii vanish in 79 AD?", "why", "Pompeii"),
        ("why do we yawn", "why", "yawn"),
        ("what did Gregor Mendel discover?", "why", "Gregor Mendel"),
        ("who designed the Eiffel Tower", "what", "Eiffel Tower"),
        ("what happened at Pompeii?", "what", "Pompeii"),
        ("what made Genoa a trading power?", "what", "Genoa"),
        ("the influence of the printing press on literacy", "effects", "printing press"),
        # A question in two parts is about both: no frame takes the first part alone.
        ("who was Ada Lovelace and what did she write?", "overview", WHOLE),
    ],
)
def test_question_shaped_topics_name_their_subject(topic: str, frame: str, subject: str) -> None:
    found, found_subject = match_frame(topic)
    assert (found.name, found_subject) == (
        frame,
        topic.rstrip("?") if subject is WHOLE else subject,
    )


def _titled(*titles: str) -> list[SearchResult]:
    return [
        SearchResult(title=t, url=f"https://example.org/{i}", content=t)
        for i, t in enumerate(titles)
    ]


@pytest.mark.parametrize(
    ("subject", "titles", "article"),
    [
        ("human heart", ("Human", "Heart rate", "Heart"), "Heart"),
        ("Ada Lovelace", ("Charles Babbage", "Ada Lovelace"), "Ada Lovelace"),
        ("Lovelace", ("Analytical engine", "Ada Lovelace"), "Ada Lovelace"),
        ("steam engines", ("Steam", "Steam engine"), "Steam engine"),
        ("World War I", ("World War II",), None),
        ("glaciers", ("Ice age", "Valley"), None),
    ],
)
def test_the_subjects_own_article_is_found_by_its_title(
    subject: str, titles: tuple[str, ...], article: str | None
) -> None:
    found = subject_article(subject, _titled(*titles))
    assert (found.title if found else None) == article


@pytest.mark.parametrize(
    ("topic", "point"),
    [("how does the internet work", "Internet"), ("how do glaciers form", "Glaciers")],
)
async def test_with_nothing_found_yet_the_subject_is_the_one_point(topic: str, point: str) -> None:
    plan = await ExtractiveEngine().plan(topic, [], None)
    assert plan.investigation_points == [point]
    assert all(query.split()[0] in {"internet", "glaciers"} for query in plan.search_queries)


async def test_its_names_the_subject_and_an_unresolved_the_term_is_not_quoted() -> None:
    genre = SearchResult(
        title="Jazz",
        url="https://example.org/jazz",
        content="Jazz is a music genre that originated in New Orleans. Its roots are in blues "
        "and ragtime of the late nineteenth century. The term was first used in print in "
        "Chicago around 1915 by newspaper writers.",
    )
    claims = await quoted("Jazz", "Origins", genre)
    assert any(c.startswith("Jazz's roots are in blues") for c in claims)
    assert not any(c.startswith("The term was first used") for c in claims)


async def test_an_it_after_an_opening_clause_is_the_subject_only_where_the_one_before_was() -> None:
    source = page(
        "Allosaurus",
        "Allosaurus is a genus of theropod dinosaur that lived in the late Jurassic. "
        "As one of the first well-known theropod dinosaurs, it has long attracted attention. "
        "When Allosaurus was described in 1877, it was compared with living reptiles.",
    )
    claims = await quoted("Allosaurus", "Allosaurus", source)
    # Right after the lead, whose subject it is, "it" is Allosaurus.
    assert any(
        c.startswith("As one of the first well-known theropod dinosaurs, Allosaurus has")
        for c in claims
    )
    assert any(c.startswith("When Allosaurus was described") for c in claims)
    lanzhou = page(
        "Lanzhou",
        "Lanzhou is the capital and largest city of Gansu province in northwestern China. "
        "Located on the banks of the Yellow River, it is a key regional transportation hub. "
        "Historically, it has been a major link on the Northern Silk Road. "
        "The Yellow River floods most summers and its silt reaches the sea in spring. "
        "Unusually, it carries more silt than any river of its size in the world.",
    )
    claims = await quoted("Lanzhou", "Lanzhou", lanzhou)
    assert "Historically, Lanzhou has been a major link on the Northern Silk Road." in claims
    # After a sentence about the river, "it" may be the river: not quoted.
    assert not any("carries more silt" in c for c in claims), claims
    wars = page(
        "Byzantine-Ottoman wars",
        "The Byzantine-Ottoman wars were a series of conflicts between the Ottoman Turks and "
        "the Byzantines. Ultimately, they lost Constantinople in 1453, ending the conflicts. "
        "When the Ottomans took the city in 1453, it became their capital.",
    )
    claims = await quoted("Byzantine-Ottoman wars", "Byzantine-Ottoman wars", wars)
    assert not any("they lost Constantinople" in c for c in claims)  # who lost it?


async def test_she_becomes_the_title_only_in_an_article_about_that_person() -> None:
    sinking = page(
        "Sinking of the Titanic",
        "RMS Titanic sank in the North Atlantic Ocean on 15 April 1912 after she struck an "
        "iceberg. She sank two hours and forty minutes later, with the loss of 1,500 lives.",
    )
    curie = page(
        "Marie Curie",
        "Marie Curie was a Polish and naturalised-French physicist and chemist. She won the "
        "1911 Nobel Prize in Chemistry for the discovery of radium and polonium.",
    )
    claims = await quoted("the sinking of the Titanic", "Sinking of the Titanic", sinking)
    assert not any("Sinking of the Titanic sank" in c for c in claims), claims
    # Quoted right after the sentence it leans on, the ship's "She" reads as the source
    # writes it; each sentence is cited.
    lead = (
        "RMS Titanic sank in the North Atlantic Ocean on 15 April 1912 after she struck an iceberg."
    )
    leaning = "She sank two hours and forty minutes later, with the loss of 1,500 lives."
    assert leaning in claims and claims[claims.index(leaning) - 1] == lead, claims
    claims = await quoted("Marie Curie", "Marie Curie", curie)
    assert any(c.startswith("Marie Curie won the 1911 Nobel Prize") for c in claims), claims


DUST_BOWL = page(
    "Dust Bowl",
    "The Dust Bowl was a period of severe dust storms on the American prairies in the 1930s. "
    "The prairies lie between the Mississippi River and the Rocky Mountains. "
    "The Dust Bowl was caused by severe drought and by farming that failed to prevent wind "
    "erosion. The Dust Bowl led to the Soil Conservation Act of 1935 and to a wave of "
    "migration to California.",
)
PLOWING = page(
    "Deep plowing",
    "Deep plowing turns the soil over to a depth of a foot or more. Deep plowing of the "
    "prairie removed the grass that held the soil, which contributed to the Dust Bowl.",
)


def _sections(draft: str) -> dict[str, str]:
    """Each `###` section's text by heading, and the summary and findings under theirs."""
    parts = re.split(r"^#{2,3} (.+)$", draft, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize(
    ("topic", "asked"),
    [
        ("why did the Dust Bowl happen", ["Causes and contributing factors"]),
        ("the causes of the Dust Bowl", ["Causes and contributing factors"]),
        # The second part of a question asks too.
        ("what was the Dust Bowl, and why did it happen?", ["Causes and contributing factors"]),
        ("effects of the Dust Bowl on farming", ["Effects and consequences"]),
        ("what did the Dust Bowl change?", ["Effects and consequences"]),
        ("pros and cons of deep plowing", ["Advantages", "Drawbacks and risks"]),
        ("the benefits of deep plowing", ["Advantages"]),
        # A form word inside a name asks for nothing: the placebo effect is a subject.
        ("What is the placebo effect?", []),
        ("the Dust Bowl", []),
    ],
)
def test_a_questions_form_asks_for_its_answers(topic: str, asked: list[str]) -> None:
    assert [answer.heading for answer in answers_asked(topic)] == asked


async def test_a_why_question_is_answered_by_what_the_sources_say_caused_it() -> None:
    plan = await ExtractiveEngine().plan("why did the Dust Bowl happen", [DUST_BOWL], None)
    draft = await ExtractiveEngine().write(plan, [DUST_BOWL, PLOWING], None, None)
    sections = _sections(draft)
    # The summary opens with the answer; the rest is found under its heading.
    assert sections["Executive Summary"].strip().startswith("The Dust Bowl was caused by")
    findings = sections["Key Findings"] + sections.get("Causes and contributing factors", "")
    assert "**Causes and contributing factors:** Deep plowing" in findings
    # The same sources asked for effects answer with what the Dust Bowl brought about.
    plan = await ExtractiveEngine().plan("the effects of the Dust Bowl", [DUST_BOWL], None)
    draft = await ExtractiveEngine().write(plan, [DUST_BOWL, PLOWING], None, None)
    sections = _sections(draft)
    effects = sections["Executive Summary"] + sections.get("Effects and consequences", "")
    assert "led to the Soil Conservation Act" in effects
    assert "caused by severe drought" not in sections["Executive Summary"].split(".")[0]


@pytest.mark.parametrize(
    "sentence",
    [
        "The invasion was initiated with the aim of forcing Russia to comply with the blockade.",
        "The wall was built in order to stop emigration to the West.",
        "The king sought to restore his authority over the barons.",
    ],
)
def test_a_purpose_answers_why_they_did_it(sentence: str) -> None:
    assert says(answers_asked("why did Napoleon invade Russia")[0], sentence) > 0


async def test_pros_and_cons_name_both_or_say_which_the_sources_leave_open() -> None:
    cheap = page(
        "Dry farming",
        "Dry farming grows crops without irrigation in dry regions. Dry farming is cheap, "
        "since it needs no canals or pumps. A drawback of dry farming is its low yield in a "
        "drought year.",
    )
    plan = await ExtractiveEngine().plan("pros and cons of dry farming", [cheap], None)
    draft = await ExtractiveEngine().write(plan, [cheap], None, None)
    sections = _sections(draft)
    told = " ".join(sections.values())
    assert "Dry farming is cheap" in told and "low yield" in told
    bare = page("Dry farming", "Dry farming grows crops without irrigation in dry regions.")
    draft = await ExtractiveEngine().write(plan, [bare], None, None)
    open_questions = _sections(draft)[GAPS_SECTION]
    assert "Advantages" in open_questions and "Drawbacks and risks" in open_questions


async def test_a_passing_mention_is_quoted_only_where_it_speaks_to_the_topic() -> None:
    sahara = page(
        "Sahara",
        "The Sahara is a desert spanning North Africa. Its climate is hot and dry, and its "
        "climate has swung between wet and dry phases.",
    )
    camel = page(
        "Camel",
        "A camel is an even-toed ungulate with humps on its back. Camels store fat in their "
        "humps and can go a week without water. Caravans of camels crossed the Sahara for "
        "many centuries.",
    )
    mali = page(
        "Mali",
        "Mali is a landlocked country in West Africa with a capital at Bamako. Timbuktu was a "
        "centre of learning. Its north lies in the Sahara, where the climate allows little rain.",
    )
    claims = await quoted("Sahara climate", "Sahara", sahara, camel, mali)
    # Each names the Sahara once; only one says anything of the climate asked about.
    assert any("where the climate allows little rain" in c for c in claims)
    assert not any("Caravans" in c for c in claims)


async def test_the_summary_opens_with_the_subject_not_a_thing_of_it() -> None:
    migration = page(
        "Dust Bowl migration",
        "The Dust Bowl migration was a movement of farm families out of the Dust Bowl. The "
        "Dust Bowl migration took the Dust Bowl's farmers west to California.",
    )
    plan = await ExtractiveEngine().plan("the Dust Bowl", [DUST_BOWL, migration], None)
    draft = await ExtractiveEngine().write(plan, [migration, DUST_BOWL], None, None)
    cited = re.findall(r"\[\^(\d+)\]", _sections(draft)["Executive Summary"])
    # The subject's own article first, two sentences at most; then the others about it.
    assert cited[:2] == ["1", "1"] and "2" in cited[2:]
    assert draft.split("[^1]: ")[1].startswith("[Dust Bowl](")


async def test_a_section_under_an_article_about_the_topic_quotes_what_it_says_of_itself() -> None:
    writer = page(
        "Ada Quill",
        "Ada Quill was an English writer known for her four novels about the gentry of Kent.",
    )
    novel = page(
        "The Glass Orchard",
        "The Glass Orchard is a novel by English author Ada Quill. Written when she was aged "
        "20, it was her third novel and was published in 1813. A novel of manners, it follows "
        "the heroine Mara Vell, who learns the cost of hasty judgments. Ada Quill revised the "
        "novel twice before her death.",
    )
    county = page("Kent", "Kent is a county in South East England. Its gentry built houses.")
    said = await quoted(
        "the life and work of Ada Quill", "The Glass Orchard", writer, novel, county
    )
    # Neither sentence names Ada Quill: they say what the novel, an article about her, is.
    assert (
        "A novel of manners, The Glass Orchard follows the heroine Mara Vell, who learns the "
        "cost of hasty judgments." in said
    )
    assert not any("county" in s for s in said)


async def test_a_connective_is_left_out_and_a_sentence_leaning_on_another_not_quoted() -> None:
    leaning = "Additional military uses are reconnaissance and early warning."
    satellite = page(
        "Navigation satellite",
        "A navigation satellite is a satellite that broadcasts its position and time. "
        f"{leaning} Furthermore, the satellite carries an atomic clock. As a result of its "
        "clock, a navigation satellite times signals to a billionth of a second. In "
        "addition, it orbits at about 20,000 km.",
    )
    said = await quoted("navigation satellite", "Uses", satellite)
    assert leaning not in said
    # Without "Furthermore," and "In addition,": the category noun and the pronoun become
    # the article's subject, as in any other sentence.
    assert "The navigation satellite carries an atomic clock." in said
    assert "The navigation satellite orbits at about 20,000 km." in said
    assert (
        "As a result of its clock, a navigation satellite times signals to a billionth of a "
        "second." in said
    ), "'As a result of' is no connective"


async def test_what_an_article_says_of_itself_is_quoted_only_of_a_part_of_a_name() -> None:
    sound = page(
        "Sound",
        "In physics, sound is a vibration that propagates as an acoustic wave through a "
        "medium. Sound travels faster in water than in air.",
    )
    television = page(
        "Television",
        "Television is a telecommunication medium for transmitting moving images and sound. "
        "Television is a mass medium for advertising, entertainment, news, and sports. "
        "Television sets carry loudspeakers for the sound.",
    )
    said = await quoted("the physics of sound", "Television", sound, television)
    assert "Television is a mass medium for advertising, entertainment, news, and sports." not in (
        said
    )


async def test_an_impersonal_it_is_not_the_subject() -> None:
    market = page(
        "Market",
        "A market is a place where parties exchange goods. It can be said that a market sets "
        "the value of goods. It is one of the oldest institutions.",
    )
    claims = await quoted("market", "Market", market)
    assert not any(re.match(r"(?:The )?[Mm]arket can be said", c) for c in claims), claims


async def test_a_lead_that_names_a_person_by_another_name_first_is_quoted() -> None:
    voltaire = SearchResult(
        title="Voltaire",
        url="https://example.org/voltaire",
        content=(
            "François-Marie Arouet, known by his pen name Voltaire, was a French Enlightenment "
            "writer, philosopher, satirist, and historian. "
            "In his later years, he settled near Geneva at Ferney."
        ),
    )
    claims = await quoted("Voltaire", "Life", voltaire)
    assert any(
        c.startswith("François-Marie Arouet, known by his pen name Voltaire") for c in claims
    )
    assert not any("he settled" in c for c in claims)
