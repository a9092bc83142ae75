"""How each role of the LLM engine calls its model: its model, sampling settings and bounds.

A role's table names only what differs from `[models.default]`; the rest is inherited.
"""

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

Role = Literal["planner", "researcher", "writer", "reviewer"]
ROLES: tuple[Role, ...] = ("planner", "researcher", "writer", "reviewer")
DEFAULT_MODEL = "openai:gpt-4o-mini"
StructuredOutput = Literal["auto", "json_schema", "function_calling", "json_mode", "prompt"]


def _reject_empty(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError(
            "system_prompt cannot be an empty string: leave it out for the built-in prompt"
        )
    return value


SystemPrompt = Annotated[str | None, AfterValidator(_reject_empty)]


class ModelConfig(BaseModel):
    """One role's model and sampling settings; None means the model's (or default's) own."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        DEFAULT_MODEL, min_length=1, description="'provider:model', e.g. openai:gpt-4o-mini."
    )
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, gt=0, description="Longest answer, in tokens.")
    timeout_seconds: int = Field(300, ge=10, le=600, description="Time cap of one call.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries of 429, 5xx, timeouts.")
    stop_sequences: list[str] | None = None
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    seed: int | None = None
    system_prompt: SystemPrompt = Field(
        None, description="Replaces the role's built-in system prompt (none: the built-in one)."
    )
    structured_output: StructuredOutput = Field(
        "auto",
        description="How plans, routing decisions and reviews are asked for: a JSON schema "
        "(response_format), a forced tool call, JSON mode, or the schema in the prompt; auto "
        "tries them in that order once per model and keeps the first its server accepts.",
    )

    @property
    def provider(self) -> str:
        """The provider prefix ('openai' when the model names none)."""
        return self.model.split(":", 1)[0] if ":" in self.model else "openai"

    @property
    def model_name(self) -> str:
        """The model without its provider prefix (what price tables and servers call it)."""
        return self.model.split(":", 1)[1] if ":" in self.model else self.model


class RoleOverrides(BaseModel):
    """The same fields as `ModelConfig`, all optional: what one role changes."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, min_length=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, gt=0)
    timeout_seconds: int | None = Field(None, ge=10, le=600)
    max_retries: int | None = Field(None, ge=0, le=20)
    stop_sequences: list[str] | None = None
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    seed: int | None = None
    system_prompt: SystemPrompt = None
    structured_output: StructuredOutput | None = None


class ModelRoles(BaseModel):
    """`[models.default]` and one optional table per role."""

    model_config = ConfigDict(extra="forbid")

    default: ModelConfig = Field(default_factory=ModelConfig)
    planner: RoleOverrides = Field(default_factory=RoleOverrides)
    researcher: RoleOverrides = Field(default_factory=RoleOverrides)
    writer: RoleOverrides = Field(default_factory=RoleOverrides)
    reviewer: RoleOverrides = Field(default_factory=RoleOverrides)

    def for_role(self, role: Role) -> ModelConfig:
        """Return the default settings with the role's own on top."""
        overrides: RoleOverrides = getattr(self, role)
        return self.default.model_copy(update=overrides.model_dump(exclude_unset=True))


class ModelPrice(BaseModel):
    """US dollars per million tokens, for the cost estimate."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, description="Per million input (prompt) tokens.")
    output: float = Field(ge=0, description="Per million output (completion) tokens.")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Return the dollars one call costs."""
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


# List prices when this table was written; override or extend with [prices."model"] tables.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(input=0.15, output=0.60),
    "gpt-4o": ModelPrice(input=2.50, output=10.00),
    "gpt-4.1-mini": ModelPrice(input=0.40, output=1.60),
    "gpt-4.1": ModelPrice(input=2.00, output=8.00),
}
