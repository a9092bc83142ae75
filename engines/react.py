"""The ReAct loop's turns as the LLM engine answers them, one model request a turn.

The researcher runs the loop and its tools one turn at a time, checkpointing each turn.
"""

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

from core.models import ResearchPlan, SearchResult
from engines.recording import record_fallback
from engines.structured_asking import StructuredAsker
from prompts import researcher
from prompts.researcher import REACT_TOOLS
from tools.errors import ProviderError


def tool_spec(name: str) -> dict[str, Any]:
    """Return the OpenAI function definition of one of the loop's tools."""
    args, description = REACT_TOOLS[name]
    parameters = convert_to_openai_tool(args)["function"]["parameters"]
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


class ReActTurns(StructuredAsker):
    """The per-turn half of the `Investigator` protocol, on the researcher's model."""

    max_cycles: int = 3

    def _react_init(self, max_cycles: int) -> None:
        self.max_cycles = max_cycles
        self._with_tools: dict[tuple[str, ...], Runnable[Any, BaseMessage]] = {}
        # Models seen answering a ReAct turn without a tool call: they are asked for queries.
        self._no_tool_calls: set[str] = set()

    def react_messages(
        self, plan: ResearchPlan, done: Sequence[str], sources: Sequence[SearchResult]
    ) -> list[BaseMessage]:
        """Return the loop's first messages: instructions, points and what is known already."""
        return [
            self._system("researcher", researcher.REACT_SYSTEM),
            HumanMessage(
                researcher.react_message(plan.theme, plan.investigation_points, done, sources)
            ),
        ]

    def calls_tools(self) -> bool:
        """Return False once the model answered a first turn without a tool call."""
        return self._configs["researcher"].model not in self._no_tool_calls

    def _bound_tools(self, tools: Sequence[str]) -> Runnable[Any, BaseMessage]:
        key = tuple(tools)
        if key not in self._with_tools:
            model: BaseChatModel = self._models["researcher"]
            self._with_tools[key] = model.bind_tools([tool_spec(name) for name in key])
        return self._with_tools[key]

    async def react_turn(
        self, messages: Sequence[BaseMessage], tools: Sequence[str]
    ) -> AIMessage | None:
        """Answer one Thought -> Action turn; None when the model failed (recorded as a fallback).

        A first turn without a tool call marks the model as one that does not call tools
        here: it is asked for queries instead, from now on.
        """
        model = self._bound_tools(tools)
        asked = list(messages)

        async def op() -> tuple[AIMessage, AIMessage]:
            answer = await model.ainvoke(asked)
            assert isinstance(answer, AIMessage)
            return answer, answer

        try:
            turn = await self._ask("researcher", op)
        except ProviderError as exc:
            record_fallback("investigate", f"the researcher model failed: {exc}")
            return None
        if not turn.tool_calls and not any(isinstance(m, AIMessage) for m in asked):
            self._no_tool_calls.add(self._configs["researcher"].model)
        return turn
