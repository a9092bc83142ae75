"""Checkpoints written before the models moved still load.

A checkpoint names each model it holds by module and class. Until version 0.1's
restructuring every state model lived in `graph.models`; they are now in `core.models`,
`core.options` and `core.usage`. Data files and Redis stores written before that name
the old module. This registers `graph.models` as an alias module holding the same
classes, and the serializers' allowlists take the old names too, so a thread started
before an upgrade can be read, resumed and listed after it.
"""

import sys
import types

from pydantic import BaseModel

from core import models, options, usage

LEGACY_MODULE = "graph.models"
# The models a checkpoint could name under the old module (all of them lived there).
LEGACY_MODELS: tuple[type[BaseModel], ...] = (
    options.RunOptions,
    models.ResearchPlan,
    models.SearchResult,
    models.ResearchNote,
    models.ReviewIssue,
    models.ReviewScores,
    models.CitationCheck,
    models.Review,
    models.Draft,
    usage.NodeUsage,
    usage.Usage,
    usage.TokenUsage,
    usage.NodeSubmission,
    usage.RoundRecord,
    models.ApprovalDecision,
)


def register() -> list[tuple[str, str]]:
    """Make the old module importable by name; the (module, class) pairs it answers for."""
    if LEGACY_MODULE not in sys.modules:
        alias = types.ModuleType(
            LEGACY_MODULE, "Old name of the state models (see stores.legacy_names)."
        )
        for model in LEGACY_MODELS:
            setattr(alias, model.__name__, model)
        sys.modules[LEGACY_MODULE] = alias
    return [(LEGACY_MODULE, model.__name__) for model in LEGACY_MODELS]
