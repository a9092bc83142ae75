from pathlib import Path

import pytest

from tools.extraction import Page, extract_main_text

PAGES = Path(__file__).parent / "fixtures" / "pages"
ARTICLE_URL = "https://coastal.example.org/a/123?utm_source=feed"


@pytest.fixture(scope="module")
def article() -> Page:
    return extract_main_text((PAGES / "article.html").read_text(encoding="utf-8"), ARTICLE_URL)


def lines(page: Page) -> list[str]:
    return [line.strip().removeprefix("- ") for line in page.text.splitlines()]


def test_article_text_is_kept_with_headings_and_list_items_on_their_own_lines(
    article: Page,
) -> None:
    assert "A lighthouse is a tower that carries a powerful light at its top" in article.text
    assert "Lighthouses remain in service because a light on the shore" in article.text
    assert "The lamp and the lens" in lines(article)
    assert "Keepers and automation" in lines(article)
    assert "A fixed light shines without a break." in lines(article)
    assert "An occulting light is lit for longer than it is dark." in lines(article)


def test_navigation_is_dropped(article: Page) -> None:
    assert "Harbour news" not in article.text
    assert "Tide tables" not in article.text


def test_cookie_banner_is_dropped(article: Page) -> None:
    assert "cookies" not in article.text


def test_share_widget_is_dropped(article: Page) -> None:
    assert "Share on" not in article.text


def test_comments_are_dropped(article: Page) -> None:
    assert "3 comments" not in article.text
    assert "my grandfather kept the light" not in article.text


def test_related_links_block_is_dropped(article: Page) -> None:
    assert "Related articles" not in article.text
    assert "The history of foghorns" not in article.text


def test_read_more_line_inside_the_article_is_dropped(article: Page) -> None:
    assert "The forgotten foghorns" not in article.text


def test_byline_is_dropped(article: Page) -> None:
    assert "Jane Marlow" not in article.text


def test_footer_is_dropped(article: Page) -> None:
    assert "privacy policy" not in article.text


def test_title_comes_from_og_title(article: Page) -> None:
    assert article.title == "How lighthouses work"


def test_title_falls_back_to_the_title_tag() -> None:
    page = extract_main_text("<html><head><title> Tide  tables </title></head><body></body></html>")
    assert page.title == "Tide tables"


def test_title_falls_back_to_the_first_heading() -> None:
    page = extract_main_text(
        "<html><body><h1>Tide tables</h1><p>High water at noon.</p></body></html>"
    )
    assert page.title == "Tide tables"


def test_canonical_url_becomes_final_url(article: Page) -> None:
    assert article.url == ARTICLE_URL
    assert article.final_url == "https://coastal.example.org/articles/how-lighthouses-work"


def test_relative_canonical_url_is_resolved_against_the_page_url() -> None:
    html = '<html><head><link rel="canonical" href="/articles/7"></head><body></body></html>'
    page = extract_main_text(html, "https://example.org/a/7?ref=home")
    assert page.final_url == "https://example.org/articles/7"


def test_final_url_is_the_page_url_without_a_canonical_link() -> None:
    page = extract_main_text("<html><body><p>Hello.</p></body></html>", "https://example.org/x")
    assert page.final_url == "https://example.org/x"


def test_html_lang_gives_the_language_without_region() -> None:
    page = extract_main_text((PAGES / "standfirst.html").read_bytes())
    assert page.language == "de"


def test_published_date_comes_from_article_published_time(article: Page) -> None:
    assert article.published_date == "2023-04-12T08:30:00+00:00"


def test_published_date_falls_back_to_json_ld() -> None:
    html = (
        "<html><head><title>Ferry strike</title>"
        '<script type="application/ld+json">{"@context": "https://schema.org", '
        '"@type": "NewsArticle", "datePublished": "2024-02-01T10:00:00Z"}</script>'
        "</head><body><p>The ferry crews walked out at dawn.</p></body></html>"
    )
    assert extract_main_text(html).published_date == "2024-02-01T10:00:00Z"


@pytest.mark.parametrize(
    ("charset", "codec", "words"),
    [
        ("windows-1252", "cp1252", "Café crème, Käse und Brötchen – ein Frühstück für 5 €"),
        ("iso-8859-1", "latin-1", "Große Straße, schöne Aussicht über den Fluss"),
        ("koi8-r", "koi8-r", "Маяк стоит на скале у самого моря"),
        ("shift_jis", "shift_jis", "灯台は岬の先端に立っている"),
    ],
)
def test_bytes_in_a_declared_non_utf8_charset_are_decoded(
    charset: str, codec: str, words: str
) -> None:
    html = (
        f'<html><head><meta charset="{charset}"><title>{words}</title></head>'
        f"<body><article><p>{words}.</p></article></body></html>"
    )
    page = extract_main_text(html.encode(codec))
    assert page.title == words
    assert words in page.text


def test_standfirst_outside_the_article_body_is_kept() -> None:
    page = extract_main_text((PAGES / "standfirst.html").read_text(encoding="utf-8"))
    lead = "Ein Kunststoffhersteller will Rohstoffe aus Pflanzenresten gewinnen"
    assert page.text.startswith(lead)
    assert "Zucker statt Erdöl" in lines(page)
    assert "Redaktion" not in page.text


def test_page_without_an_article_falls_back_to_its_visible_text() -> None:
    html = (
        "<html><head><title>Closed</title></head><body>"
        "<div><b>Maintenance</b><br>We will be back at 14:00.</div></body></html>"
    )
    assert "We will be back at 14:00." in extract_main_text(html).text


def test_document_without_markup_yields_its_text() -> None:
    assert extract_main_text("Back soon.").text == "Back soon."


def test_empty_document_gives_an_empty_page() -> None:
    page = extract_main_text(b"", "https://example.org/")
    assert page.text == ""
    assert page.title == ""
    assert page.final_url == "https://example.org/"
