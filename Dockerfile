# The research service: `research-agent serve` by default, `research-agent worker` for
# workers (see docker-compose.yml). The Wikipedia demo corpus is indexed at build time,
# so a container needs no network beyond its model and search providers.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RESEARCH_DATA_DIR=/data \
    RESEARCH_CORPUS_INDEX=/opt/research/corpus/index.sqlite \
    RESEARCH_HOST=0.0.0.0

WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY graph ./graph
COPY nodes ./nodes
COPY engines ./engines
COPY tools ./tools
COPY prompts ./prompts
RUN pip install . \
    && useradd --create-home --uid 10001 research \
    && mkdir -p /data /opt/research/corpus \
    && chown research:research /data /opt/research/corpus

USER research
WORKDIR /home/research
RUN research-agent corpus demo

EXPOSE 8000
# Ready means the checkpointer, event log and registry answer (GET /readyz).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2).status != 200)"]
CMD ["research-agent", "serve"]
