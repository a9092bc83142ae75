"""Failures of model calls, mapped to the same taxonomy as the search APIs.

So one retry loop (`tools.api_client.call_with_retries`) serves searches and models, and
the server's Retry-After is honoured for both.
"""

import json
import re

import httpx
import openai

from engines.base import ModelAccessError
from tools.api_client import parse_retry_after
from tools.errors import ProviderError, error_for_status

_MESSAGE_CHARS = 300
# Providers echo part of a rejected key ("Incorrect API key provided: sk-ab...yz"): never pass it on.
_KEY_LIKE = re.compile(r"\b(?:sk|gsk|key|api)[-_][A-Za-z0-9_\-*.]{4,}", re.IGNORECASE)


def _message(exc: BaseException) -> str:
    text: object = getattr(exc, "message", "") or exc
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = (inner.get("message") if isinstance(inner, dict) else inner) or text
    return _KEY_LIKE.sub("[redacted]", str(text))[:_MESSAGE_CHARS] or type(exc).__name__


def classify_model_error(exc: BaseException, timeout_s: float) -> ProviderError:
    """Map a chat-client failure to the taxonomy; re-raise what is not a call failure."""
    if isinstance(exc, ProviderError):
        return exc
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        return error_for_status(
            status, _message(exc), parse_retry_after(headers.get("retry-after"))
        )
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException | TimeoutError):
        return ProviderError(f"no answer within {timeout_s:g} s", "TIMEOUT_ERROR")
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError | ConnectionError):
        return ProviderError(
            f"could not reach the model server ({type(exc).__name__})", "NETWORK_ERROR"
        )
    if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
        return ProviderError("the model server sent a malformed response", "SERVER_ERROR")
    raise exc  # e.g. an answer that does not fit the schema: the caller repairs it


def access_error(
    error: ProviderError, role: str, model: str, base_url: str | None
) -> ModelAccessError:
    """Say which setting to fix for a non-retryable failure of `role`'s model."""
    where = f"the {role} model {model!r}" + (f" at {base_url}" if base_url else "")
    if error.error_type == "AUTH_ERROR":
        fix = (
            "set OPENAI_API_KEY (or RESEARCH_LLM_API_KEY) to a key this server accepts"
            if base_url is None
            else "set RESEARCH_LLM_API_KEY to a key this server accepts"
        )
        return ModelAccessError(f"{where} refused the API key ({error}); {fix}")
    return ModelAccessError(
        f"{where} rejected the request ({error}); check models.{role}.model (or models.default.model)"
        " and RESEARCH_LLM_BASE_URL"
    )
