"""All configuration in one place: environment (RESEARCH_*) over a TOML file over defaults."""

import os
from pathlib import Path
from typing import Literal

from platformdirs import user_config_path, user_data_path
from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

APP_NAME = "research-agent"
CONFIG_ENV = "RESEARCH_CONFIG"


def default_config_file() -> Path:
    """The TOML file read when RESEARCH_CONFIG does not name one."""
    return Path(os.environ.get(CONFIG_ENV) or user_config_path(APP_NAME) / "config.toml")


class Settings(BaseSettings):
    """Every knob of the service, typed and checked at start-up."""

    model_config = SettingsConfigDict(env_prefix="RESEARCH_", extra="forbid")

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
    search_provider: Literal["local"] = Field("local", description="Which search provider to use.")
    engine: Literal["extractive"] = Field(
        "extractive", description="Which engine plans, writes and reviews."
    )
    search_concurrency: int = Field(
        5, ge=1, le=32, description="Searches run at once by one researcher step."
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

    @property
    def corpus_index_path(self) -> Path:
        """The corpus index in effect."""
        return self.corpus_index or self.data_dir / "corpus" / "index.sqlite"

    @property
    def checkpoint_path(self) -> Path:
        """The checkpoint database in effect."""
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
