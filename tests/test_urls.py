from core.urls import normalize_url


def test_scheme_and_host_are_lowercased() -> None:
    assert normalize_url("HTTPS://Example.ORG/Page") == "https://example.org/Page"


def test_fragment_and_tracking_parameters_are_dropped() -> None:
    url = "https://example.org/a?utm_source=x&id=7&fbclid=abc#section"
    assert normalize_url(url) == "https://example.org/a?id=7"


def test_trailing_slash_and_default_port_are_ignored() -> None:
    assert normalize_url("http://example.org:80/docs/") == normalize_url("http://example.org/docs")


def test_other_ports_and_paths_stay_distinct() -> None:
    assert normalize_url("http://example.org:8080/a") != normalize_url("http://example.org/a")
    assert normalize_url("http://example.org/a") != normalize_url("http://example.org/b")
