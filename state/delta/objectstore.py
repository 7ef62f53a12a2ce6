"""Object stores (S3 and S3-compatible servers) for fsspec and for Spark.

One location is spelled two ways: ``s3://bucket/key`` for fsspec (s3fs) and
``s3a://bucket/key`` for Spark and Delta (Hadoop's S3A connector); the
conversions live in :mod:`epochal.state.delta.paths` (``to_spark``, ``to_url``).

Credentials never pass through epochal's configuration, ``_metadata`` or logs:
both sides read them from the standard AWS environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, a
profile, or an instance role). botocore (under s3fs) reads them itself; for
the JVM, Spark copies the three variables into ``fs.s3a.*`` and S3A's default
provider chain reads the environment too. fsspec's own options
(``FSSPEC_S3_*`` variables, ``fsspec.config.conf["s3"]``) apply to the Python
side only.

Spark reads ``s3://`` with S3A as well (``fs.s3.impl``), so a path listed by
fsspec can be handed to Spark as it is. A custom endpoint (an S3-compatible
server such as SeaweedFS or moto) is read from
``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (botocore's own variables) and
handed to S3A as ``fs.s3a.endpoint`` with path-style access; any
``spark.hadoop.fs.s3a.*`` key in ``spark.conf`` overrides what is derived here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import fsspec
import fsspec.config

from epochal.state.delta.paths import to_url
from epochal.state.errors import LocationError

# Hadoop's S3A connector for the Hadoop pyspark 4.2.0 bundles (hadoop-client-api-3.5.0.jar),
# with the AWS SDK v2 bundle hadoop-aws 3.5.0 is built against (hadoop-project's aws-java-sdk-v2.version).
HADOOP_VERSION = "3.5.0"
AWS_SDK_V2_VERSION = "2.35.4"
S3A_PACKAGES = (
    f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}",
    f"software.amazon.awssdk:bundle:{AWS_SDK_V2_VERSION}",
)
S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")


def is_s3(location: str | None) -> bool:
    """True for an ``s3://``, ``s3a://`` or ``s3n://`` location."""
    return bool(location) and location.split("://", 1)[0].lower() in S3_SCHEMES and "://" in location


def uses_s3(locations: Iterable[str | None]) -> bool:
    return any(is_s3(location) for location in locations)


def spark_packages(locations: Iterable[str | None]) -> list[str]:
    """Maven coordinates Spark needs for these locations (the S3A connector when one is on S3)."""
    return list(S3A_PACKAGES) if uses_s3(locations) else []


def endpoint_from_env(environ: Mapping[str, str]) -> str | None:
    return next((environ[name] for name in ENDPOINT_VARIABLES if environ.get(name)), None)


def s3a_conf(environ: Mapping[str, str]) -> dict[str, str]:
    """``spark.hadoop.fs.s3a.*`` settings derived from the environment (never credentials)."""
    # s3:// (the fsspec spelling, e.g. planned landing files) is S3A for Spark too.
    conf: dict[str, str] = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    endpoint = endpoint_from_env(environ)
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(endpoint.lower().startswith("https://")).lower()
    region = next((environ[name] for name in REGION_VARIABLES if environ.get(name)), None)
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    return conf


def delta_rs_reaches(location: str) -> bool:
    """True if delta-rs reads and writes ``location`` here: a local or S3 path (the stores it is configured for)."""
    return to_url(location).split("://", 1)[0] in ("file", "s3")


def delta_rs_options(location: str, environ: Mapping[str, str]) -> dict[str, str]:
    """delta-rs (``deltalake``) storage options for ``location`` derived from the environment (never credentials).

    delta-rs reads credentials and the region from the AWS variables itself; a custom endpoint is named
    here, and a plain-HTTP one (a loopback server) must be allowed explicitly.
    """
    if not is_s3(location):
        return {}
    options: dict[str, str] = {}
    endpoint = endpoint_from_env(environ)
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.lower().startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    region = next((environ[name] for name in REGION_VARIABLES if environ.get(name)), None)
    if region:
        options["AWS_REGION"] = region
    return options


def configure_fsspec() -> None:
    """Process-wide s3fs defaults epochal relies on (a user's explicit setting wins).

    s3fs caches directory listings forever by default; the JVM writes Delta
    logs that Python then lists (the completed-checkpoint store, retention), so
    a cached listing would hide new commits. Listings are never cached.
    """
    fsspec.config.conf.setdefault("s3", {}).setdefault("use_listings_cache", False)


def check_buckets(locations: Mapping[str, str | None], storage_options: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`LocationError` for the first of ``locations`` (configuration key -> location) on S3 whose
    bucket does not exist or cannot be read; other locations pass unasked.

    epochal creates no bucket, but s3fs makes a missing one when asked for a folder in it (``makedirs``): a
    misspelt bucket in ``checkpoints.dir`` or ``warehouse`` would become a new, empty bucket of the account and
    the deployment would start over in it. The deployment calls this before a command's first write (its lease).
    """
    asked: set[str] = set()
    for key, location in locations.items():
        if not is_s3(location):
            continue
        bucket = to_url(location).split("://", 1)[1].split("/", 1)[0]
        if bucket in asked:
            continue
        asked.add(bucket)
        fs = fsspec.filesystem("s3", **dict(storage_options or {}))
        if fs.exists(bucket):
            continue
        try:  # exists() says False for any failure: listing says which
            fs.ls(bucket)
        except FileNotFoundError:
            raise LocationError(
                f"{key}: {location}: the bucket {bucket!r} does not exist (epochal creates no buckets)",
                action=f"create the bucket, or fix `{key}:` in the configuration", key=key, location=location,
            ) from None
        except Exception as exc:  # noqa: BLE001 - the store's own error, named with the location
            raise LocationError(
                f"{key}: {location}: the bucket {bucket!r} cannot be read: {type(exc).__name__}: {exc}",
                action="check the credentials and the endpoint in the environment (README, Object storage)",
                key=key, location=location,
            ) from exc
