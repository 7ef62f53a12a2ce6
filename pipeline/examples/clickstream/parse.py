"""Spark parsing of one epoch's landing files into events and quarantine.

``parse_landing(spark, files, partition)`` reads the epoch's planned files
(``spark.read.text``: one row per line, split on ``\\n``, ``\\r\\n`` or
``\\r``; a UTF-8 byte-order mark opening a file is skipped) and returns
``ParsedBatch(events, quarantine)``:

- ``events``: ``event_id``, ``user_id``, ``event_type`` (strings), ``amount``
  (double: the purchase amount, >= 0; **null for views and carts**, whose
  amount is ignored whatever it holds), ``event_time`` (timestamp, the UTC
  instant), ``partition`` (the epoch's key) and ``source_file`` (the path
  exactly as the caller gave it).
- ``quarantine``: ``partition``, ``file``, ``raw`` (the line's text; for a
  line that is not valid UTF-8, its bytes read as ISO-8859-1, so that
  ``raw.encode("latin-1")`` gives them back exactly), ``reason`` (a code of
  :mod:`reasons`).

Blank lines (only ASCII whitespace: space, tab, LF, VT, FF, CR) are dropped,
so ``events + quarantine + blank = lines``. Two identical bad lines give two
quarantine rows. The same ``event_id`` twice in one epoch gives two events;
:func:`dedupe_within_batch` keeps one.

Validation (see :mod:`reasons` for the order in which checks apply):

- A line must be exactly one JSON value (RFC 8259: no ``NaN``/``Infinity``,
  no single quotes, no comments, no trailing content) within Jackson's read
  limits (numbers up to 1000 characters, strings up to 20,000,000, nesting up
  to 999 levels: the exactly-one-value check adds one), and an object. Fields
  other than the five below are ignored (matched case-sensitively); one of the
  five named twice is ``duplicate_field:<f>``. An escaped unpaired surrogate
  (``"\\ud800"``) in a string becomes ``?`` (Spark's strings are UTF-8).
- A field that is absent or JSON ``null`` is missing.
- ``event_id``/``user_id``: non-empty JSON strings. ``event_type``: one of
  ``view``, ``add_to_cart``, ``purchase`` (case-sensitive).
- ``event_time``: a JSON string ``YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+HH:MM|-HH:MM)``
  (upper-case ``T`` and ``Z``, offset at most 18:00; fraction digits past the
  sixth are truncated), a real calendar date and time (no 24:00, no leap
  second), whose UTC instant is within years 0001..9999. The same shape
  without an offset is ``timestamp_without_offset``; anything else is
  ``bad_timestamp``.
- ``amount`` (purchases only): a finite JSON number >= 0 (``-0`` is accepted).

Everything is Spark SQL (no Python UDF) and safe with ``spark.sql.ansi.enabled``:
the JSON is parsed with ``from_json`` in PERMISSIVE mode once per JSON type
(string, double, boolean, map, array) to learn each field's JSON type, the
"exactly one value" check wraps the line in ``[...]`` and in ``{"v":...}``,
timestamps go through a regex and ``try_cast``.

File paths are read by Spark, which reads a path as a Hadoop glob pattern
(``*?[]{}\\``) and a ``:`` in it as a URI scheme: planned paths must not contain
them. ``layout.partition_files`` lists such names as they are;
``HourlyFolderSource`` refuses them at plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

from epochal import empty_frame
from epochal.pipeline.examples.clickstream import reasons as R

EVENT_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("user_id", StringType()),
        StructField("event_type", StringType()),
        StructField("amount", DoubleType()),
        StructField("event_time", TimestampType()),
        StructField("partition", StringType()),
        StructField("source_file", StringType()),
    ]
)
QUARANTINE_SCHEMA = StructType([StructField(name, StringType()) for name in ("partition", "file", "raw", "reason")])

# Strict RFC 8259 JSON (Spark's defaults allow NaN/Infinity and single quotes).
JSON_OPTIONS = {"mode": "PERMISSIVE", "allowNonNumericNumbers": "false", "allowSingleQuotes": "false"}
_FIELDS = R.ALL_FIELDS
_BLANK_RE = r"^[ \t\n\x0B\f\r]*\z"
_OBJECT_START_RE = r"^[ \t\n\r]*\{"
_LOCAL_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
_OFFSET = r"Z|[+-](?:(?:0[0-9]|1[0-7]):[0-5][0-9]|18:00)"
TIMESTAMP_RE = rf"^({_LOCAL_TIME})(?:\.([0-9]{{1,9}}))?({_OFFSET})\z"
TIMESTAMP_WITHOUT_OFFSET_RE = rf"^{_LOCAL_TIME}(?:\.[0-9]{{1,9}})?\z"
MIN_MICROS = -62135596800 * 1_000_000  # 0001-01-01T00:00:00Z
MAX_MICROS = 253402300800 * 1_000_000 - 1  # 9999-12-31T23:59:59.999999Z


class ParsedBatch(NamedTuple):
    """The two outputs of parsing one epoch."""

    events: DataFrame
    quarantine: DataFrame


# ----------------------------------------------------------------------------- reading

def read_lines(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """One row per line of ``files``: ``value`` (the line) and ``file`` (the path as given)."""
    if not files:
        return empty_frame(spark, "value string, file string")
    return spark.read.text(list(files)).select("value", _file_column(spark, files).alias("file"))


def _file_column(spark: SparkSession, files: Sequence[str]) -> Column:
    """The path of the current row's file as the caller gave it (Spark's own name if unknown).

    It is built on ``input_file_name()``, which is nondeterministic: a projection
    holding it is a barrier the optimizer does not push filters through.
    """
    names: dict[str, str] = {}
    for path in files:
        for key in _spark_names(spark, path):
            names.setdefault(key, path)
    mapping = F.create_map(*[F.lit(x) for kv in names.items() for x in kv])
    return F.coalesce(F.try_element_at(mapping, F.input_file_name()), F.input_file_name())


def _spark_names(spark: SparkSession, path: str) -> list[str]:
    """The forms ``input_file_name()`` may give for ``path`` (qualified by Hadoop's FileSystem)."""
    jvm = spark.sparkContext._jvm  # driver-side only: qualifying a path, not data processing
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    qualified = jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).makeQualified(jpath)
    return [qualified.toUri().toString(), qualified.toString(), path]


# ----------------------------------------------------------------------------- classification

def _json(text: Column, ddl: str) -> Column:
    return F.from_json(text, ddl, JSON_OPTIONS)


def _typed(value: Column, spark_type: str) -> Column:
    """Parse the five fields as ``spark_type``; a field of another JSON type comes back null."""
    return _json(value, "struct<" + ",".join(f"{f}:{spark_type}" for f in _FIELDS) + ">")


def _is_exactly_one_json_value(value: Column) -> Column:
    """True iff the line is one JSON value and nothing else (Jackson ignores trailing text, so wrap twice)."""
    as_array = _json(F.concat(F.lit("["), value, F.lit("]")), "array<string>")
    as_member = _json(F.concat(F.lit('{"v":'), value, F.lit("}")), "map<string,string>")
    return (F.coalesce(F.size(as_array), F.lit(0)) == 1) & as_member.isNotNull()


def _parse_step(lines: DataFrame) -> DataFrame:
    """Non-blank lines with the line-level checks and one parsed struct per JSON type."""
    value = F.col("value")
    raw_bytes = value.cast("binary")
    bad_encoding = ~F.is_valid_utf8(value)  # Spark 4's decode raises on malformed UTF-8 (ANSI): test it instead
    keep = [c for c in lines.columns if c != "value"]
    return lines.where(~value.rlike(_BLANK_RE)).select(
        *keep,
        F.when(bad_encoding, F.decode(raw_bytes, "ISO-8859-1")).otherwise(value).alias("raw"),
        bad_encoding.alias("_bad_encoding"),
        _is_exactly_one_json_value(value).alias("_one_value"),
        value.rlike(_OBJECT_START_RE).alias("_is_object"),
        F.json_object_keys(value).alias("_keys"),
        _typed(value, "string").alias("_text"),
        _typed(value, "double").alias("_num"),
        _typed(value, "boolean").alias("_bool"),
        _typed(value, "map<string,string>").alias("_map"),
        _typed(value, "array<string>").alias("_array"),
    )


def _key_count(name: str) -> Column:
    """How many times the line's top-level object names ``name`` (null if not an object)."""
    return F.size(F.filter(F.col("_keys"), lambda key: key == F.lit(name)))


def _fields_step(parsed: DataFrame) -> DataFrame:
    """Per field ``f``: ``f`` (its text, whatever its JSON type) and ``f__is_str``; the amount as a number."""
    parsed_cols = ("_text", "_num", "_bool", "_map", "_array", "_keys")
    cols = [F.col(c) for c in parsed.columns if c not in parsed_cols]
    for f in _FIELDS:
        cols.append((_key_count(f) > 1).alias(f"{f}__dup"))
        is_str = F.col(f"_text.{f}").isNotNull()
        for other in ("_num", "_bool", "_map", "_array"):
            is_str = is_str & F.col(f"{other}.{f}").isNull()
        cols += [F.col(f"_text.{f}").alias(f), is_str.alias(f"{f}__is_str")]
    cols.append(F.col("_num.amount").alias("amount__num"))
    ts_text = F.col("_text.event_time")
    fraction = F.rpad(F.substring(F.regexp_extract(ts_text, TIMESTAMP_RE, 2), 1, 6), 6, "0")
    parts = (F.regexp_extract(ts_text, TIMESTAMP_RE, 1), F.lit("."), fraction, F.regexp_extract(ts_text, TIMESTAMP_RE, 3))
    cols.append(F.when(ts_text.rlike(TIMESTAMP_RE), F.concat(*parts)).alias("_ts_canonical"))
    return parsed.select(*cols)


def _time_step(fields: DataFrame) -> DataFrame:
    """``event_time__ts``: the UTC instant, null unless a real date-time within years 1..9999."""
    ts = F.expr("try_cast(_ts_canonical AS timestamp)")  # not try_to_timestamp: it may raise SparkUpgradeException
    in_range = F.unix_micros(ts).between(MIN_MICROS, MAX_MICROS)
    return fields.withColumn("event_time__ts", F.when(in_range, ts)).drop("_ts_canonical")


def _string_field_checks(f: str) -> list[tuple[Column, str]]:
    text, is_str = F.col(f), F.col(f"{f}__is_str")
    checks = [(text.isNull(), R.missing_field(f)), (~is_str, R.bad_type(f))]
    if f in ("event_id", "user_id"):
        checks.append((F.length(text) == 0, R.bad_type(f)))
    elif f == "event_type":
        checks.append((~text.isin(*R.EVENT_TYPES), R.UNKNOWN_EVENT_TYPE))
    else:
        checks += [
            (text.rlike(TIMESTAMP_WITHOUT_OFFSET_RE), R.TIMESTAMP_WITHOUT_OFFSET),
            (F.col("event_time__ts").isNull(), R.BAD_TIMESTAMP),
        ]
    return checks


def _checks() -> list[tuple[Column, str]]:
    """``(condition, reason)`` in checking order; each condition is non-null wherever it is reached."""
    checks = [(F.col("_bad_encoding"), R.BAD_ENCODING), (~F.col("_one_value"), R.NOT_JSON), (~F.col("_is_object"), R.NOT_OBJECT)]
    checks += [(F.coalesce(F.col(f"{f}__dup"), F.lit(False)), R.duplicate_field(f)) for f in _FIELDS]
    for f in R.STRING_FIELDS:
        checks += _string_field_checks(f)
    purchase, amount = F.col("event_type") == "purchase", F.col("amount__num")
    finite = amount.isNotNull() & (F.abs(amount) < F.lit(float("inf")))
    checks += [
        (purchase & F.col("amount").isNull(), R.MISSING_AMOUNT),
        (purchase & ~finite, R.BAD_TYPE_AMOUNT),
        (purchase & (amount < 0), R.NEGATIVE_AMOUNT),
    ]
    return checks


def _reason() -> Column:
    """The first failing check's reason code; null for a valid event."""
    (cond, code), *rest = _checks()
    reason = F.when(cond, F.lit(code))
    for cond, code in rest:
        reason = reason.when(cond, F.lit(code))
    return reason


def classify_lines(lines: DataFrame, file: Column | None = None) -> DataFrame:
    """Classify the non-blank rows of ``lines`` (a ``value`` column: one line each).

    Returns ``file`` (the ``file`` expression, by default ``lines.file``),
    ``raw``, ``reason`` (null for a valid event) and the event columns
    ``event_id``, ``user_id``, ``event_type``, ``amount``, ``event_time``.
    """
    fields = _time_step(_fields_step(_parse_step(lines)))
    purchase = F.col("event_type") == "purchase"
    return fields.select(
        (F.col("file") if file is None else file).alias("file"),
        "raw",
        _reason().alias("reason"),
        "event_id",
        "user_id",
        "event_type",
        F.when(purchase, F.col("amount__num")).cast("double").alias("amount"),
        F.col("event_time__ts").alias("event_time"),
    )


def _split(classified: DataFrame, partition: str) -> ParsedBatch:
    key = F.lit(partition)
    events = classified.where(F.col("reason").isNull()).select(
        *[c.name for c in EVENT_SCHEMA.fields[:5]], key.alias("partition"), F.col("file").alias("source_file")
    )
    quarantine = classified.where(F.col("reason").isNotNull()).select(key.alias("partition"), "file", "raw", "reason")
    return ParsedBatch(events, quarantine)


# ----------------------------------------------------------------------------- public API

def parse_lines(lines: DataFrame, partition: str) -> ParsedBatch:
    """Split raw lines (``value``, ``file``) of one epoch into events and quarantine rows."""
    # coalesce with the nondeterministic input_file_name() (never reached unless file is null): a filter fence.
    return _split(classify_lines(lines, F.coalesce(F.col("file"), F.input_file_name())), partition)


def parse_landing(spark: SparkSession, files: Sequence[str], partition: str, *, hold=None) -> ParsedBatch:
    """Parse one epoch: its planned landing ``files`` (paths or Hadoop URLs) and its partition key.

    Both outputs are lazy. Without ``hold`` each reads and parses the files; with
    ``hold`` (a function that persists a frame, e.g. ``_Held.hold``) the lines are
    classified once into a persisted frame (the raw text kept for bad lines only)
    and both outputs are filters of it. An empty ``files`` gives empty frames.
    """
    if not files:
        return ParsedBatch(empty_frame(spark, EVENT_SCHEMA), empty_frame(spark, QUARANTINE_SCHEMA))
    lines = spark.read.text(list(files))
    # The file column is computed last, on top of the parsing: being nondeterministic it keeps
    # the events/quarantine filters above the projections (else they would be inlined, many times over).
    classified = classify_lines(lines, _file_column(spark, files))
    if hold is not None:
        raw = F.when(F.col("reason").isNotNull(), F.col("raw")).alias("raw")
        classified = hold(classified.select(*[raw if c == "raw" else F.col(c) for c in classified.columns]))
    return _split(classified, partition)


def dedupe_within_batch(events: DataFrame) -> DataFrame:
    """Keep one event per ``event_id``: the first by (source_file, event_time, user_id, event_type, amount nulls first)."""
    order = [F.col(c).asc() for c in ("source_file", "event_time", "user_id", "event_type")]
    window = Window.partitionBy("event_id").orderBy(*order, F.col("amount").asc_nulls_first())
    return events.withColumn("_rank", F.row_number().over(window)).where(F.col("_rank") == 1).drop("_rank")
