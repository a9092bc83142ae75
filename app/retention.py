"""How long runs' evidence is kept: pruned by age and size at start-up, then every hour."""

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from app.settings import Settings
from stores.evidence import EvidenceStore

logger = logging.getLogger(__name__)

PRUNE_EVERY_S = 3600.0


async def prune_once(store: EvidenceStore, settings: Settings) -> int:
    """Apply the retention settings once; how many runs' evidence went."""
    days, cap_mb = settings.evidence_retention_days, settings.evidence_max_mb
    older_than = datetime.now(UTC) - timedelta(days=days) if days else None
    max_bytes = int(cap_mb * 1_000_000) if cap_mb else None
    if older_than is None and max_bytes is None:
        return 0
    return await store.prune(older_than, max_bytes)


async def keep_evidence_within(store: EvidenceStore, settings: Settings) -> None:
    """Prune now and every `PRUNE_EVERY_S` until cancelled; a failed prune waits for the next."""
    while True:
        try:
            gone = await prune_once(store, settings)
            if gone:
                logger.info("evidence of %d run(s) pruned (retention settings)", gone)
        except Exception as exc:  # the store is away for a moment: try again next time
            logger.warning("evidence prune failed: %s", exc)
        await asyncio.sleep(PRUNE_EVERY_S)
