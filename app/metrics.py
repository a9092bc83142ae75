"""Prometheus metrics of the service, in a registry of its own (one per app)."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from stores.registry import TERMINAL, ThreadRecord


class ServiceMetrics:
    """Runs by status, run duration, events sent, SSE clients connected."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.runs = Counter(
            "research_runs", "Runs that entered each status.", ["status"], registry=self.registry
        )
        self.duration = Histogram(
            "research_run_duration_seconds",
            "From start to a terminal status.",
            ["status"],
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
            registry=self.registry,
        )
        self.events_sent = Counter(
            "research_sse_events_sent", "Events sent to SSE clients.", registry=self.registry
        )
        self.sse_clients = Gauge(
            "research_sse_clients", "SSE clients connected now.", registry=self.registry
        )

    def record_status(self, record: ThreadRecord) -> None:
        """Count a status change; a terminal one also records the run's duration."""
        self.runs.labels(record.status).inc()
        if record.status in TERMINAL:
            seconds = (record.updated_at - record.created_at).total_seconds()
            self.duration.labels(record.status).observe(max(0.0, seconds))

    def exposition(self) -> bytes:
        """Return the metrics in the text format Prometheus scrapes."""
        return generate_latest(self.registry)
