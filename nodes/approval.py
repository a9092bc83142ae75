"""Human approval: pause the run with the plan and apply the human's decision."""

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from core.models import ApprovalDecision
from core.state import ResearchState
from nodes.context import Deps
from nodes.progress import tell


def approve_plan(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Interrupt with the plan; approve keeps it, edit replaces it, reject re-plans with feedback.

    An edited plan is told again (`plan` with `edited`).
    """
    plan = state.get("task_plan")
    if plan is None:
        raise ValueError("nothing to approve: no plan")
    answer = ApprovalDecision.model_validate(
        interrupt({"type": "plan", "plan": plan.model_dump(mode="json")})
    )
    record = {"human_input": answer.model_dump(mode="json")}
    if answer.decision == "approve":
        return {
            **record,
            "plan_approved": True,
            "messages": [HumanMessage(content="Plan approved.")],
        }
    if answer.decision == "edit" and answer.plan is not None:
        tell(
            runtime, {"event": "plan", "plan": answer.plan.model_dump(mode="json"), "edited": True}
        )
        return {
            **record,
            "task_plan": answer.plan,
            "plan_approved": True,
            "messages": [HumanMessage(content="Plan edited and approved.")],
        }
    feedback = answer.feedback or ""
    return {
        **record,
        "task_plan": None,
        "plan_approved": False,
        "feedback": feedback,
        "messages": [HumanMessage(content=f"Plan rejected: {feedback}")],
    }
