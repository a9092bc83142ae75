"""The graph's steps by name: nodes account their work under these, routing returns them."""

from typing import Final

SUPERVISOR: Final = "supervisor"
APPROVE_PLAN: Final = "approve_plan"
RESEARCHER: Final = "researcher"
WRITER: Final = "writer"
REVIEWER: Final = "reviewer"
FINALIZE: Final = "finalize"
