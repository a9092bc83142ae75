"""Chat models for the LLM engine: how each role's client is built and its answers capped."""

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from engines.llm_config import ModelConfig

# Local OpenAI-compatible servers (vLLM, Ollama, llama.cpp) ignore the key but the client wants one.
PLACEHOLDER_KEY = "not-needed"
# Characters per token, for estimating the usage of a reply whose server sent none.
CHARS_PER_TOKEN = 4


def speaks_openai(base_url: str | None) -> bool:
    """Whether the server is OpenAI's own (None: the client's default, which is OpenAI's)."""
    return base_url is None or (urlsplit(base_url).hostname or "").endswith("openai.com")


def token_cap(max_tokens: int, provider: str, base_url: str | None) -> dict[str, Any]:
    """Return the call arguments that cap an answer at `max_tokens` on this provider and server.

    The OpenAI client sends `max_completion_tokens`, which llama-cpp-python and others
    ignore, so any server but OpenAI's gets `max_tokens` as well.
    """
    cap: dict[str, Any] = {"max_tokens": max_tokens}
    if provider == "openai" and not speaks_openai(base_url):
        cap["extra_body"] = {"max_tokens": max_tokens}
    return cap


def chat_model(config: ModelConfig, base_url: str | None, api_key: str | None) -> BaseChatModel:
    """Build one role's chat model; the client's own retries are off (ours honour Retry-After).

    Raises ValueError (unknown provider) or ImportError (its integration is not installed).
    """
    kwargs: dict[str, Any] = {"timeout": config.timeout_seconds, "max_retries": 0}
    optional = {
        "temperature": config.temperature,
        "stop": config.stop_sequences,
        "top_p": config.top_p,
        "seed": config.seed,
        "base_url": base_url,
        "api_key": api_key or (PLACEHOLDER_KEY if base_url else None),
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    if config.max_tokens is not None:
        kwargs.update(token_cap(config.max_tokens, config.provider, base_url))
    if config.provider == "openai":
        kwargs["stream_usage"] = True  # the last streamed chunk carries the token counts
    model = init_chat_model(config.model_name, model_provider=config.provider, **kwargs)
    if not isinstance(model, BaseChatModel):  # only when configurable fields are asked for
        raise TypeError(f"{config.model} did not give a chat model")
    return model


def text_of(message: BaseMessage) -> str:
    """Return a message's text, whatever shape its content has."""
    return message.text if isinstance(message.text, str) else str(message.content)


def estimated_tokens(prompt: Sequence[BaseMessage], answer: str) -> tuple[int, int]:
    """Estimate prompt and answer tokens from their length, for a server that sent no usage."""
    tokens_in = -(-sum(len(text_of(m)) for m in prompt) // CHARS_PER_TOKEN)
    return tokens_in, -(-len(answer) // CHARS_PER_TOKEN)
