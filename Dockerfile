# epochal as a container image: the project with its pinned Python packages (and the
# [deploy] extra: dagster-postgres, s3fs), Java 17, and every jar Spark needs resolved at
# build time into the image's Ivy cache (EPOCHAL_IVY_DIR): Delta's, and the S3 ones
# (hadoop-aws, aws-java-sdk-bundle) named in deploy/epochal-compose.yaml. A container
# resolves them from that cache: nothing is downloaded when it starts.
# docker-compose.yml runs this one image as the Dagster code server, webserver and daemon,
# the Spark master and worker, and the demo. The build context is only what is copied
# below (.dockerignore): no virtualenv, .git, local data or .env reaches the build.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java \
 && mkdir -p /opt/dagster/home
ENV JAVA_HOME=/opt/java \
    PYTHONUNBUFFERED=1 \
    EPOCHAL_IVY_DIR=/opt/ivy

WORKDIR /app
COPY pyproject.toml README.md ./
COPY config ./config
COPY state ./state
COPY pipeline ./pipeline
COPY orchestration ./orchestration
COPY deploy ./deploy
RUN pip install --no-cache-dir '.[deploy]' \
 && python -m epochal.state.session --warm --config deploy/epochal-compose.yaml

ENTRYPOINT ["epochal"]
CMD ["--help"]
