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
    RESEARCH_HOST=0.0.0.0 \
    RESEARCH_PORT=8000

# The dependencies first, at the versions of constraints.txt (a reproducible build), in a
# layer of their own: a change of the source does not install them again.
# Pango and fonts for the report as PDF (WeasyPrint): DejaVu for Latin and Arabic,
# WenQuanYi Micro Hei for CJK.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 \
        libharfbuzz-subset0 fonts-dejavu-core fonts-wqy-microhei \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY constraints.txt ./
RUN pip install -r constraints.txt
COPY pyproject.toml README.md ./
COPY app ./app
COPY graph ./graph
COPY nodes ./nodes
COPY engines ./engines
COPY tools ./tools
COPY prompts ./prompts
COPY core ./core
COPY stores ./stores
COPY service ./service
RUN pip install --no-deps . \
    && pip check \
    && useradd --create-home --uid 10001 research \
    && mkdir -p /data /opt/research/corpus \
    && chown research:research /data /opt/research/corpus

USER research
WORKDIR /home/research
RUN research-agent corpus demo

EXPOSE 8000
# Ready means the checkpointer, event log and registry answer (GET /readyz), on the port
# the service listens on (RESEARCH_PORT).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('RESEARCH_PORT') or '8000'; sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=2).status != 200)"]
# Without RESEARCH_API_KEYS, `serve` refuses to listen on 0.0.0.0 (and says so).
CMD ["research-agent", "serve"]
