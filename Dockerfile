# epochal as a container image: the project with its Python packages at the versions of
# requirements.lock (and the [deploy] extra: dagster-postgres), Java 17, and every jar Spark
# needs resolved at build time into the image's Ivy cache (EPOCHAL_IVY_DIR): Delta's, and the
# S3 ones (hadoop-aws and the AWS SDK v2 bundle) named in deploy/epochal-compose.yaml. A
# container resolves them from that cache: nothing is downloaded when it starts. The same
# step leaves the driver JVM's class-data-sharing archive in /root/.cache/epochal/jvm/.
# docker-compose.yml runs this one image as the Dagster code server, webserver and daemon,
# the Spark master and worker, and the demo. The build context is only what is copied
# below (.dockerignore): no virtualenv, .git, local data or .env reaches the build.
FROM python:3.12-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java \
 && mkdir -p /opt/dagster/home
ENV JAVA_HOME=/opt/java \
    PYTHONUNBUFFERED=1 \
    EPOCHAL_IVY_DIR=/opt/ivy

WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
COPY epochal ./epochal
COPY config ./config
COPY state ./state
COPY pipeline ./pipeline
COPY orchestration ./orchestration
COPY deploy ./deploy
RUN pip install --no-cache-dir -c requirements.lock '.[deploy]' \
 && python -m epochal.state.session --warm --config deploy/epochal-compose.yaml

ENTRYPOINT ["epochal"]
CMD ["--help"]
