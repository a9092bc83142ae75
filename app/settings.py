"""All configuration in one place: environment (RESEARCH_*) over a TOML file over defaults."""

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from platformdirs import user_config_path, user_data_path
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from engines.llm_config import DEFAULT_PRICES, ModelPrice, ModelRoles, RoleOverrides

APP_NAME = "research-agent"
ProviderName = Literal["tavily", "brave", "local"]
PROVIDERS: tuple[ProviderName, ...] = ("tavily", "brave", "local")
KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "brave": "BRAVE_API_KEY"}
CONFIG_ENV = "RESEARCH_CONFIG"


MemberType = Literal["web-search", "corpus-search"]
# The search providers each member type may use.
MEMBER_TOOLS: dict[MemberType, tuple[ProviderName, ...]] = {
    "web-search": ("tavily", "brave"),
    "corpus-search": ("local",),
}


def member_type(provider: ProviderName) -> MemberType:
    """Return the member type that searches with `provider`."""
    return "corpus-search" if provider == "local" else "web-search"


class MemberConfig(RoleOverrides):
    """One member of the research team (`[[team.members]]`): where it searches, its model, its budget.

    Each investigation point of a plan is researched by one member of each entry. The
    model fields are what the entry changes of the researcher role (`[models.researcher]`);
    the budgets are each member's, within the run's.
    """

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$",
        description="Its name in records and events (letters, digits, _ . -; unique).",
    )
    type: MemberType = Field(description="web-search or corpus-search.")
    tools: list[ProviderName] | None = Field(
        None,
        min_length=1,
        description="The search providers it uses, of its type (default: the configured ones).",
    )
    max_searches: int | None = Field(None, ge=1, le=100, description="Searches per member.")
    max_seconds: float | None = Field(None, gt=0, le=86_400, description="Seconds per member.")
    token_budget: int | None = Field(
        None, ge=1, description="Model tokens per member (also bounded by its share of the run's)."
    )

    @model_validator(mode="after")
    def _tools_of_its_type(self) -> "MemberConfig":
        allowed = MEMBER_TOOLS[self.type]
        wrong = [t for t in self.tools or () if t not in allowed]
        if wrong:
            raise ValueError(
                f"{', '.join(wrong)} is not a {self.type} tool: use {' or '.join(allowed)}"
            )
        return self


class TeamConfig(BaseModel):
    """The research team (`[team]`): its members, one entry per kind of member."""

    model_config = ConfigDict(extra="forbid")

    members: list[MemberConfig] = Field(min_length=1, max_length=15)

    @field_validator("members", mode="after")
    @classmethod
    def _unique_names(cls, members: list[MemberConfig]) -> list[MemberConfig]:
        names = [m.name for m in members]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"member names must be unique: {', '.join(twice)} used twice")
        return members


def default_config_file() -> Path:
    """Return the TOML file read when RESEARCH_CONFIG does not name one."""
    return Path(os.environ.get(CONFIG_ENV) or user_config_path(APP_NAME) / "config.toml")


def _secret(key: SecretStr | None) -> str | None:
    """Return the key's value stripped, None when it is unset or blank."""
    return key.get_secret_value().strip() or None if key is not None else None


class Settings(BaseSettings):
    """Every knob of the service, typed and checked at start-up."""

    # An empty variable counts as unset, as deployments write it (`KEY: ${KEY:-}`).
    model_config = SettingsConfigDict(
        env_prefix="RESEARCH_", env_nested_delimiter="__", extra="forbid", env_ignore_empty=True
    )

    data_dir: Path = Field(
        default_factory=lambda: user_data_path(APP_NAME),
        description="Where checkpoints and the corpus index live.",
    )
    corpus_index: Path | None = Field(
        None, description="The local corpus index file (default: DATA_DIR/corpus/index.sqlite)."
    )
    checkpoint_db: Path | None = Field(
        None, description="The SQLite checkpoint file (default: DATA_DIR/checkpoints.sqlite)."
    )
    search_provider: str = Field(
        "auto",
        description="auto (Tavily if its key is set, else Brave if its key is set, else local), "
        "or one or more of tavily, brave, local joined by commas (results are merged).",
    )
    tavily_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("TAVILY_API_KEY", "tavily_api_key")
    )
    brave_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("BRAVE_API_KEY", "brave_api_key")
    )
    tavily_base_url: str = Field("https://api.tavily.com", description="Tavily API base URL.")
    brave_base_url: str = Field(
        "https://api.search.brave.com/res/v1", description="Brave web search API base URL."
    )
    search_timeout_s: float = Field(30.0, gt=0, le=300, description="Timeout of one API call.")
    search_max_retries: int = Field(3, ge=0, le=10, description="Retries of a retryable failure.")
    retry_base_delay_s: float = Field(1.0, ge=0, le=60, description="First retry delay.")
    retry_max_delay_s: float = Field(10.0, ge=0, le=300, description="Longest retry delay.")
    pages_per_query: int = Field(
        2,
        ge=0,
        le=10,
        description="Top results per query whose page the researcher reads (web providers).",
    )
    page_timeout_s: float = Field(20.0, gt=0, le=300, description="Time cap of one page fetch.")
    page_max_bytes: int = Field(5 * 1024 * 1024, gt=0, description="Size cap of one page.")
    page_respect_robots: bool = Field(True, description="Honour robots.txt.")
    page_allow_private: bool = Field(
        False, description="Let the scraper reach private addresses (intranet deployments, tests)."
    )
    page_allowed_ports: list[int] = Field(
        [80, 443], min_length=1, description="Ports the scraper may connect to."
    )
    engine: Literal["auto", "extractive", "llm"] = Field(
        "auto",
        description="Which engine plans, writes and reviews: llm (chat models), extractive "
        "(no model), or auto (llm when a model key or base URL is set, else extractive).",
    )
    llm_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("RESEARCH_LLM_API_KEY", "OPENAI_API_KEY", "llm_api_key"),
        description="Key of the model provider (OPENAI_API_KEY works too).",
    )
    llm_base_url: str | None = Field(
        None,
        description="Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, Groq), "
        "e.g. http://localhost:11434/v1.",
    )
    models: ModelRoles = Field(
        default_factory=ModelRoles,
        description="[models.default] and per-role tables planner, researcher, writer, reviewer; "
        "environment: RESEARCH_MODELS__WRITER__MODEL=openai:gpt-4o.",
    )
    react_max_cycles: int = Field(
        3,
        ge=0,
        le=10,
        description="LLM engine: Thought -> Action -> Observation cycles per research step once "
        "the plan's queries are done (0: ask for new queries once instead).",
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        description="US dollars per million input/output tokens, by model name, for cost estimates.",
    )
    search_concurrency: int = Field(
        5,
        ge=1,
        le=32,
        description="Searches run at once by one searcher (a member researcher, or a "
        "research step without members).",
    )
    max_parallel_members: int = Field(
        4,
        ge=1,
        le=15,
        description="Member researchers of a research step working at once; each runs its "
        "share of the plan's queries (one member per investigation point).",
    )
    team: TeamConfig | None = Field(
        None,
        description="[team] with [[team.members]] (name, type, tools, model settings, "
        "budgets); none: one member per search provider in effect.",
    )
    search_delay_ms: int = Field(
        0, ge=0, le=60_000, description="Latency added to every search (to rehearse slow networks)."
    )
    simulate_latency_ms: int = Field(
        0,
        ge=0,
        le=60_000,
        description="Replace engine and provider by ones that only sleep this long.",
    )

    @field_validator("data_dir", "corpus_index", "checkpoint_db", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    evidence_retention_days: float = Field(
        0,
        ge=0,
        le=36_500,
        description="Keep a run's evidence (the texts it read, its model calls) this many "
        "days; 0: as long as the thread.",
    )
    evidence_max_mb: float = Field(
        1024,
        ge=0,
        description="Cap on the stored evidence texts, in MB: past it the oldest runs' "
        "evidence goes first; 0: no cap.",
    )

    collection_max_file_bytes: int = Field(
        20 * 1024 * 1024,
        ge=1024,
        le=50 * 1024 * 1024,
        description="Largest file uploaded to a collection (413 beyond it).",
    )
    collection_max_files: int = Field(
        10, ge=1, le=100, description="Files one upload to a collection may hold."
    )
    collection_max_documents: int = Field(
        200, ge=1, le=10_000, description="Documents one collection may hold."
    )
    collection_max_collections: int = Field(
        50, ge=1, le=10_000, description="Collections one API key may hold."
    )

    redis_url: str | None = Field(
        None,
        description="Redis (or Valkey; no module needed) for the "
        "checkpoints, events, registry and run queue, e.g. redis://localhost:6379/0; none: "
        "the SQLite file, runs executing in the API process.",
    )
    in_process_worker: bool = Field(
        True,
        description="With Redis: the API process also executes queued runs (`serve "
        "--no-worker` leaves them to `research-agent worker` processes).",
    )
    worker_lease_seconds: int = Field(
        10,
        ge=2,
        le=600,
        description="With Redis: a worker renews its hold on a run every third of this; a "
        "worker silent for longer is taken for dead and another takes the run over.",
    )

    watch_min_seconds: float = Field(
        3600,
        ge=0.1,
        le=3600,
        description="The shortest interval a watch may have (an hour; tests lower it to seconds).",
    )
    watch_poll_seconds: float = Field(
        10.0,
        ge=0.05,
        le=600,
        description="How often the scheduler looks for due watches and finished refreshes.",
    )
    watch_webhook_retry_s: float = Field(
        2.0,
        ge=0.01,
        le=300,
        description="The first wait before a webhook delivery is tried again (doubling each time).",
    )

    @field_validator("redis_url", mode="after")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"{value!r} is not a redis:// (or rediss://, unix://) URL")
        return value

    api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="API keys of the HTTP service: a JSON list, or keys joined by commas; none: "
        "it listens on 127.0.0.1 only.",
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _key_list(cls, value: Any) -> Any:
        """Read `["k1", "k2"]` or `k1,k2` (a key with a comma or quote: use the JSON list)."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except ValueError:
                    raise ValueError(
                        'not a JSON list of strings; write \'["key1", "key2"]\' or key1,key2'
                    ) from None
            return [key.strip() for key in text.split(",") if key.strip()]
        return value

    host: str = Field("127.0.0.1", description="Address the HTTP service listens on.")
    port: int = Field(8000, ge=1, le=65535, description="Port of the HTTP service.")
    max_concurrent_runs: int = Field(8, ge=1, le=1000, description="Runs executing at once.")
    max_queued_runs: int = Field(100, ge=0, le=100_000, description="Runs waiting beyond those.")
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="A connection that has not sent a whole request head within this is closed.",
    )
    max_connections: int = Field(
        2048,
        ge=16,
        le=1_000_000,
        description="Open client connections; past it a new one closes the oldest idle one.",
    )
    max_streams: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        description="Event streams (SSE) open at once; past it a new one gets 503.",
    )
    max_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=1024**3,
        description="Largest request body the HTTP service reads (413 beyond it).",
    )

    @field_validator("search_provider", mode="after")
    @classmethod
    def _known_providers(cls, value: str) -> str:
        names = [n.strip().lower() for n in value.split(",") if n.strip()]
        if names == ["auto"]:
            return "auto"
        unknown = [n for n in names if n not in PROVIDERS]
        if not names or unknown:
            raise ValueError(
                f"unknown search provider {', '.join(unknown) or repr(value)}: "
                f"use auto, or one or more of {', '.join(PROVIDERS)}"
            )
        return ",".join(dict.fromkeys(names))

    @field_validator("llm_base_url", mode="after")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL, e.g. http://localhost:11434/v1")
        return value.rstrip("/") if value else None

    @model_validator(mode="after")
    def _llm_is_reachable_by_settings(self) -> "Settings":
        if self.engine == "llm" and not self._llm_configured:
            raise ValueError(
                "engine llm needs a model key or server: set OPENAI_API_KEY (or RESEARCH_LLM_API_KEY), "
                "or RESEARCH_LLM_BASE_URL for an OpenAI-compatible server"
            )
        return self

    @property
    def _llm_configured(self) -> bool:
        return self.llm_base_url is not None or self.llm_key() is not None

    @property
    def engine_in_effect(self) -> Literal["extractive", "llm"]:
        """The engine chosen, or the one `auto` picks from what is configured."""
        if self.engine == "auto":
            return "llm" if self._llm_configured else "extractive"
        return self.engine

    def llm_key(self) -> str | None:
        """Return the model provider's key, if one is set."""
        return _secret(self.llm_api_key)

    @model_validator(mode="after")
    def _chosen_providers_have_keys(self) -> "Settings":
        for name in self.search_provider.split(","):
            if name in KEY_VARIABLES and self._key(name) is None:
                raise ValueError(
                    f"search provider {name} needs an API key: set {KEY_VARIABLES[name]} in the "
                    f"environment or {name}_api_key in {default_config_file()}"
                )
        return self

    @model_validator(mode="after")
    def _team_tools_are_usable(self) -> "Settings":
        for index, entry in enumerate(self.team.members if self.team else []):
            where = f"team.members[{index}] ({entry.name})"
            if entry.tools is None and not self._tools_of(entry):
                raise ValueError(
                    f"{where}: no {entry.type} search provider is in effect "
                    f"({', '.join(self.search_providers)}): name its tools"
                )
            for name in entry.tools or ():
                if name in KEY_VARIABLES and self._key(name) is None:
                    raise ValueError(
                        f"{where}: its tool {name} needs an API key: set {KEY_VARIABLES[name]}"
                    )
        return self

    def _tools_of(self, entry: MemberConfig) -> list[ProviderName]:
        """Return the providers a team entry searches: its own, else those in effect of its type."""
        if entry.tools is not None:
            return list(entry.tools)
        return [p for p in self.search_providers if p in MEMBER_TOOLS[entry.type]]

    @property
    def team_members(self) -> list[tuple[MemberConfig, list[ProviderName]]]:
        """Each kind of member with its search providers: `[team]`'s, else one per provider."""
        if self.team is not None:
            return [(entry, self._tools_of(entry)) for entry in self.team.members]
        return [
            (MemberConfig(name=p, type=member_type(p), tools=[p]), [p])
            for p in self.search_providers
        ]

    def _key(self, provider: str) -> str | None:
        return _secret(self.tavily_api_key if provider == "tavily" else self.brave_api_key)

    @property
    def search_providers(self) -> list[ProviderName]:
        """The providers in effect: the explicit choice, else the first with a key, else local."""
        if self.search_provider != "auto":
            return [cast(ProviderName, n) for n in self.search_provider.split(",")]
        keyed: tuple[ProviderName, ...] = ("tavily", "brave")
        return [next((n for n in keyed if self._key(n) is not None), "local")]

    def api_key(self, provider: Literal["tavily", "brave"]) -> str:
        """Return the provider's key (checked at start-up for every chosen provider)."""
        key = self._key(provider)
        if key is None:
            raise ValueError(f"{KEY_VARIABLES[provider]} is not set")
        return key

    @property
    def corpus_index_path(self) -> Path:
        """The corpus index in effect."""
        return self.corpus_index or self.data_dir / "corpus" / "index.sqlite"

    @property
    def collection_max_upload_bytes(self) -> int:
        """The body cap of an upload: its files at their largest, and the form around them."""
        return self.collection_max_files * self.collection_max_file_bytes + 64 * 1024

    @property
    def collections_dir(self) -> Path:
        """Where collections live (without Redis) and their search indexes are built."""
        return self.data_dir / "collections"

    @property
    def checkpoint_path(self) -> Path:
        """The data file in effect: checkpoints, and the event log, registry and evidence."""
        return self.checkpoint_db or self.data_dir / "checkpoints.sqlite"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then the TOML file."""
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=default_config_file()),
        )
