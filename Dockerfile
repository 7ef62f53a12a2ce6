# epochal with its pinned Python packages and Delta's jars baked in (no download at start).
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYTHONUNBUFFERED=1 \
    EPOCHAL_IVY_DIR=/opt/ivy

WORKDIR /app
COPY pyproject.toml README.md ./
COPY config ./config
COPY state ./state
COPY pipeline ./pipeline
COPY orchestration ./orchestration
RUN pip install --no-cache-dir . \
 && python -m state.session --warm

ENTRYPOINT ["epochal"]
CMD ["--help"]
