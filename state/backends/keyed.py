"""Keyed state in Delta tables: the set-oriented backend.

Every keyed state is one Delta table at ``<root>/<stage>/<state>`` (its layout and the
properties it records: :mod:`.keyed_table`).

A stage reads the live state as a DataFrame (expired rows hidden), joins it to
its batch, and hands back new values. Only keys whose value changed are
written, in one commit per state and epoch (:mod:`.keyed_writes`: a ``MERGE``
with deletion vectors, bytes in proportion to the keys changed, or a small table rewritten).
Expired rows are deleted by the next write (Flink's cleanup on write).

Opening a table that another maximum parallelism, state type or value type
wrote is an error, as in Flink. ``snapshot`` returns a :class:`~state.handles.StateHandle` (a Delta
version); ``restore`` brings the table back to a handle's content.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from epochal.state.backends import keyed_writes
from epochal.state.backends.keyed_table import check_table, keyed_table_schema, recorded_properties
from epochal.state.backends.keyed_writes import REWRITE_BELOW_BYTES
from epochal.state.backends.values import normal_column
from epochal.state.delta import io as delta_io
from epochal.state.delta.tables import create_table, restore_table, snapshot_table
from epochal.state.descriptors import (
    AggregatingStateDescriptor,
    KeyedStateDescriptor,
    KeyedStateType,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
)
from epochal.state.determinism import PlanInspector
from epochal.state.errors import MaxParallelismMismatch, StateSchemaError
from epochal.state.fence import Fence, no_fence
from epochal.state.handles import StateHandle, StateKind
from epochal.state.keygroups import DEFAULT_MAX_PARALLELISM, check_parallelism, key_group_col, subtask_col

VOID_NAMESPACE = ""
_DELETE = "__epochal_delete"
_SEVERAL_VALUES = "several new values for one key"
EPOCH_ZERO = datetime(1970, 1, 1, tzinfo=timezone.utc)
Fold = Callable[[Column, Column], Column]  # (old value or null, the epoch's new items) -> new value


@dataclass(frozen=True)
class EpochContext:
    """The epoch being processed and its clock (the partition window end): TTL is measured on it."""

    epoch: int = 0
    now: datetime = EPOCH_ZERO


class KeyedStateBackend:
    """Keyed state of one stage, kept in Delta tables under ``root/<stage>/``."""

    def __init__(
        self,
        spark,
        root: str,
        stage: str,
        *,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
        context: EpochContext | None = None,
        rewrite_below_bytes: int = REWRITE_BELOW_BYTES,
        declared: Iterable[str] | None = None,
    ) -> None:
        check_parallelism(max_parallelism)
        #: The names of the stage's declared keyed states (None: any): only those are checkpointed and
        #: restored, so a read or write of another is refused instead of drifting from every checkpoint.
        self.declared = None if declared is None else frozenset(declared)
        self.spark = spark
        self.root = root.rstrip("/")
        self.stage = stage
        self.max_parallelism = max_parallelism
        self.context = context or EpochContext()
        self._opened: set[str] = set()
        #: Tables of at most this many live bytes are rewritten, not MERGEd (0: always MERGE).
        self.rewrite_below_bytes = rewrite_below_bytes
        #: Called before every write of a table (see :mod:`epochal.state.fence`).
        self.fence: Fence = no_fence
        #: Reads the plans of the frames written (``epochal verify``; see :mod:`epochal.state.determinism`).
        self.inspector: PlanInspector | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def begin_epoch(self, epoch: int, now: datetime) -> None:
        """Set the epoch and the clock used for TTL and ``updated_epoch`` of the next writes."""
        if now.tzinfo is None:
            raise ValueError("the epoch clock must be timezone-aware (UTC)")
        self.context = EpochContext(epoch, now.astimezone(timezone.utc))

    def table_path(self, descriptor: KeyedStateDescriptor) -> str:
        return posixpath.join(self.root, self.stage, descriptor.name)

    def open(self, descriptor: KeyedStateDescriptor) -> str:
        """Create the state table if missing, else check it matches the descriptor; return its path."""
        path = self.table_path(descriptor)
        if path in self._opened:
            return path
        if self.declared is not None and descriptor.name not in self.declared:
            raise StateSchemaError(
                f"stage {self.stage!r} uses keyed state {descriptor.name!r}, which it does not declare "
                f"(declared: {sorted(self.declared)}): it would be in no checkpoint and no restore would rewind it",
                action="add its descriptor to the stage's keyed_state",
                state=descriptor.name,
            )
        if delta_io.is_delta_table(path):
            self.check(descriptor)
        else:
            self._create(descriptor, path)
        self._opened.add(path)
        return path

    def _create(self, descriptor: KeyedStateDescriptor, path: str) -> None:
        properties = {**delta_io.state_table_properties(self.spark), **recorded_properties(descriptor, self.max_parallelism)}
        create_table(self.spark, path, keyed_table_schema(descriptor), properties)

    def check(self, descriptor: KeyedStateDescriptor) -> None:
        """Refuse the state's table if another max parallelism, state type or value type wrote it (from the
        Delta log, no Spark job; nothing when there is no table yet)."""
        check_table(self.stage, descriptor, self.table_path(descriptor), self.max_parallelism)

    # -- reading ---------------------------------------------------------------------------

    def _live(self, df: DataFrame) -> DataFrame:
        now = F.lit(self.context.now).cast("timestamp")
        return df.where(F.col("expires_at").isNull() | (F.col("expires_at") > now))

    def read(self, descriptor: KeyedStateDescriptor, *, version: int | None = None) -> DataFrame:
        """Live rows of a state: key_group, key, namespace, value, expires_at, updated_epoch.

        The read is pinned at the call: the frame shows the state's Delta version of this
        moment (or ``version``), however late Spark evaluates it, so a frame built from it
        before a write still shows the state before the write; a read after a write sees it.
        ``values`` and ``lookup`` read through here.
        """
        path = self.open(descriptor)
        return self._live(delta_io.read_pinned(self.spark, path, version))

    def read_for_parallelism(self, descriptor: KeyedStateDescriptor, parallelism: int) -> DataFrame:
        """Live rows with the ``subtask`` owning each key group, one Spark partition per subtask range."""
        check_parallelism(self.max_parallelism, parallelism)
        df = self.read(descriptor).withColumn("subtask", subtask_col("key_group", self.max_parallelism, parallelism))
        return df.repartition(parallelism, "subtask")

    def values(self, descriptor: KeyedStateDescriptor) -> DataFrame:
        """Live ``key, namespace, value``; for aggregating state the value is ``result(acc)``."""
        df = self.read(descriptor)
        if isinstance(descriptor, AggregatingStateDescriptor) and descriptor.result is not None:
            df = df.withColumn("value", descriptor.result(F.col("value")))
        return df.select("key", "namespace", "value")

    def lookup(
        self, descriptor: KeyedStateDescriptor, batch: DataFrame, key_col: str, *, namespace: str = VOID_NAMESPACE
    ) -> DataFrame:
        """``batch`` left-joined with the state's current value as column ``<state name>``."""
        state = (
            self.values(descriptor)
            .where(F.col("namespace") == namespace)
            .select(F.col("key").alias("__state_key"), F.col("value").alias(descriptor.name))
        )
        joined = batch.join(state, batch[key_col] == state["__state_key"], "left")
        return joined.drop("__state_key")

    # -- writing ---------------------------------------------------------------------------

    def _normalise(self, descriptor: KeyedStateDescriptor, df: DataFrame, value: Column) -> DataFrame:
        namespace = F.col("namespace") if "namespace" in df.columns else F.lit(VOID_NAMESPACE)
        delete = F.col(_DELETE) if _DELETE in df.columns else F.lit(False)
        return df.select(
            F.col("key").cast(descriptor.key_type).alias("key"),
            namespace.cast("string").alias("namespace"),
            value.cast(descriptor.stored_type).alias("value"),
            delete.alias(_DELETE),
        )

    def update(self, descriptor: KeyedStateDescriptor, updates: DataFrame) -> None:
        """Set the value of each key in ``updates`` (columns key, [namespace], value).

        A null value clears the key. Rows whose value equals the stored one are not
        rewritten (unless TTL must be refreshed). At most one row per key and namespace:
        several are refused (checked inside the MERGE's own job, no extra Spark job).
        """
        self._require_columns(descriptor, updates, ("key", "value"))
        self._inspect(descriptor, updates)
        df = self._normalise(descriptor, updates, F.col("value"))
        df = df.withColumn(_DELETE, F.col(_DELETE) | F.col("value").isNull())
        self._merge(descriptor, self._refuse_duplicate_keys(descriptor, df))

    def _writing(self, descriptor: KeyedStateDescriptor) -> str:
        return f"writing state {self.stage}/{descriptor.name} at epoch {self.context.epoch}"

    def _duplicate_message(self, descriptor: KeyedStateDescriptor) -> str:
        return f"{self._writing(descriptor)}: {_SEVERAL_VALUES}"

    def _refuse_duplicate_keys(self, descriptor: KeyedStateDescriptor, df: DataFrame) -> DataFrame:
        """``df`` that fails, when evaluated, if it holds several rows for one key and namespace (no job of its own;
        :meth:`_merge` turns the failure into :class:`StateSchemaError`)."""
        return keyed_writes.refuse_duplicate_keys(df, self._duplicate_message(descriptor), _DELETE)

    def insert(self, descriptor: KeyedStateDescriptor, rows: DataFrame) -> None:
        """Give keys that hold no live value a value (columns key, [namespace], value): a blind append.

        For keys the caller knows to have no live value, e.g. the rows of an anti-join with
        the state as read this epoch (the clickstream dedupe). The state is not read: the
        write costs the rows written, not the state. Rows that have expired are deleted first
        (one DELETE, only when the table's statistics show that some may have), so a key whose
        value expired ends with one row, as with :meth:`update`. Null values are not written;
        several rows for one key are refused as in :meth:`update`. A key that still has a live
        value would be stored twice: use :meth:`update` unless the caller's logic excludes it.
        """
        from delta.tables import DeltaTable

        self._require_columns(descriptor, rows, ("key", "value"))
        self._inspect(descriptor, rows)
        df = self._refuse_duplicate_keys(descriptor, self._normalise(descriptor, rows, F.col("value")))
        path = self.open(descriptor)
        self.fence(f"write state {self.stage}/{descriptor.name}")
        if descriptor.ttl is not None and self._may_hold_expired(path):
            DeltaTable.forPath(self.spark, path).delete(self._expired(""))
        new = self._state_rows(descriptor, df).where(~F.col(_DELETE) & F.col("value").isNotNull()).drop(_DELETE)
        try:
            new.write.format("delta").mode("append").save(path)
        except Exception as exc:  # noqa: BLE001 - translate the duplicate-key error
            self._raise_duplicates(descriptor, exc)
            raise

    def clear(self, descriptor: KeyedStateDescriptor, keys: DataFrame) -> None:
        """Remove the state of each key (columns key, [namespace])."""
        self._require_columns(descriptor, keys, ("key",))
        df = keys.withColumn("value", F.lit(None)).withColumn(_DELETE, F.lit(True))
        self._merge(descriptor, self._normalise(descriptor, df, F.col("value")).dropDuplicates(["key", "namespace"]))

    def append(self, descriptor: ListStateDescriptor, items: DataFrame, *, order_by: str | None = None) -> None:
        """Append elements to list state (columns key, [namespace], value[, order_by])."""
        self._require_type(descriptor, KeyedStateType.LIST)
        self._require_columns(descriptor, items, ("key", "value"))
        self._inspect(descriptor, items)
        empty = F.array().cast(descriptor.stored_type)
        self._merge_folded(descriptor, self._group_new_values(descriptor, items, order_by),
                           lambda old, new: F.concat(F.coalesce(old, empty), new))

    def put(self, descriptor: MapStateDescriptor, entries: DataFrame) -> None:
        """Put map entries (columns key, [namespace], map_key, map_value); a null map_value removes the entry."""
        self._require_type(descriptor, KeyedStateType.MAP)
        self._require_columns(descriptor, entries, ("key", "map_key", "map_value"))
        self._inspect(descriptor, entries)
        entry = F.struct(F.col("map_key").cast(descriptor.user_key_type), F.col("map_value").cast(descriptor.value_type))
        grouped = self._group_new_values(descriptor, entries.withColumn("value", entry), None)
        empty = F.create_map().cast(descriptor.stored_type)

        def fold(old: Column, new: Column) -> Column:
            merged = F.map_concat(F.coalesce(old, empty), F.map_from_entries(new))
            return F.map_filter(merged, lambda k, v: v.isNotNull())

        self._merge_folded(descriptor, grouped, fold, drop_if=lambda value: F.size(value) == 0)

    def add(self, descriptor: ReducingStateDescriptor | AggregatingStateDescriptor, items: DataFrame) -> None:
        """Add inputs to reducing or aggregating state (columns key, [namespace], value), in the JVM."""
        self._require_columns(descriptor, items, ("key", "value"))
        self._inspect(descriptor, items)
        if isinstance(descriptor, ReducingStateDescriptor):
            if descriptor.reduce is None:
                raise StateSchemaError(f"reducing state {descriptor.name!r} has no Column reduce= for set-oriented add")
            reduce = descriptor.reduce

            def fold(old: Column, new: Column) -> Column:
                step = lambda acc, x: F.when(acc.isNull(), x).otherwise(reduce(acc, x))  # noqa: E731
                return F.aggregate(new, old.cast(descriptor.value_type), step)
        elif isinstance(descriptor, AggregatingStateDescriptor):
            if descriptor.add is None or descriptor.create is None:
                raise StateSchemaError(f"aggregating state {descriptor.name!r} has no Column create/add for set-oriented add")

            def fold(old: Column, new: Column) -> Column:
                return F.aggregate(new, F.coalesce(old, descriptor.create()).cast(descriptor.acc_type), descriptor.add)
        else:
            raise StateSchemaError(f"state {descriptor.name!r} is {descriptor.state_type.value} state: add() needs reducing or aggregating state")
        self._merge_folded(descriptor, self._group_new_values(descriptor, items, None), fold)

    def write_full_values(self, descriptor: KeyedStateDescriptor, rows: DataFrame) -> None:
        """Write already-computed values (key, namespace, value, __epochal_delete): used by per-key stages."""
        self._inspect(descriptor, rows)
        self._merge(descriptor, self._normalise(descriptor, rows, F.col("value")), unique=False)

    # -- internals -------------------------------------------------------------------------

    def _inspect(self, descriptor: KeyedStateDescriptor, df: DataFrame) -> None:
        if self.inspector is not None:
            self.inspector.see(self.stage, f"keyed state {descriptor.name}", df)

    def _require_type(self, descriptor: KeyedStateDescriptor, expected: KeyedStateType) -> None:
        if descriptor.state_type is not expected:
            raise StateSchemaError(
                f"state {descriptor.name!r} is {descriptor.state_type.value} state, this call needs {expected.value} state"
            )

    def _require_columns(self, descriptor: KeyedStateDescriptor, df: DataFrame, needed: Iterable[str]) -> None:
        missing = [c for c in needed if c not in df.columns]
        if missing:
            raise StateSchemaError(
                f"writing state {self.stage}/{descriptor.name}: missing column(s) {missing}; got {df.columns}",
                state=descriptor.name,
            )

    def _group_new_values(self, descriptor: KeyedStateDescriptor, items: DataFrame, order_by: str | None) -> DataFrame:
        namespace = F.col("namespace") if "namespace" in items.columns else F.lit(VOID_NAMESPACE)
        base = items.select(
            F.col("key").cast(descriptor.key_type).alias("key"),
            namespace.cast("string").alias("namespace"),
            F.col("value"),
            (F.col(order_by) if order_by else F.monotonically_increasing_id()).alias("__order"),
        )
        grouped = base.groupBy("key", "namespace").agg(F.sort_array(F.collect_list(F.struct("__order", "value"))).alias("__items"))
        return grouped.select("key", "namespace", F.col("__items.value").alias("new"))

    def _state_rows(self, descriptor: KeyedStateDescriptor, source: DataFrame, extra: tuple[str, ...] = ()) -> DataFrame:
        """Normalised rows (key, namespace, value, delete flag) as state table rows written this epoch."""
        ctx = self.context
        if descriptor.ttl is not None:
            expires = F.lit(ctx.now + descriptor.ttl.ttl).cast("timestamp")
        else:
            expires = F.lit(None).cast("timestamp")
        return source.select(
            key_group_col("key", self.max_parallelism).alias("key_group"),
            "key",
            "namespace",
            "value",
            expires.alias("expires_at"),
            F.lit(ctx.epoch).cast("long").alias("updated_epoch"),
            F.col(_DELETE),
            *extra,
        )

    def _expired(self, table: str) -> Column:
        now = F.lit(self.context.now).cast("timestamp")
        return F.col(f"{table}expires_at").isNotNull() & (F.col(f"{table}expires_at") <= now)

    def _merge_folded(
        self, descriptor: KeyedStateDescriptor, grouped: DataFrame, fold: Fold, *, drop_if: Callable[[Column], Column] | None = None,
    ) -> None:
        """MERGE each key's new items (``grouped``: key, namespace, new) into its value: ``fold(old, new)``.

        The old value is the target row's, inside the MERGE (null when absent or expired), so
        the MERGE's source does not read the state table: the state is scanned once, by the
        MERGE's own join, and Delta materializes only the batch. ``drop_if(value)`` removes
        the key instead (an empty map)."""
        source = grouped.select(
            "key", "namespace", F.lit(None).cast(descriptor.stored_type).alias("value"), F.lit(False).alias(_DELETE), "new"
        )
        self._merge(descriptor, source, fold=fold, drop_if=drop_if)

    def _merge(
        self, descriptor: KeyedStateDescriptor, source: DataFrame, *, fold: Fold | None = None,
        drop_if: Callable[[Column], Column] | None = None, unique: bool = True,
    ) -> None:
        """Write the source's rows into the state: one ``MERGE``, or one overwrite of a table of at most
        :attr:`rewrite_below_bytes` (see :mod:`epochal.state.backends.keyed_writes`); the same rows either way.
        ``unique``: the source holds at most one row per key (else the rewrite checks it, as a MERGE does)."""
        path = self.open(descriptor)
        clauses = self._clauses(descriptor, source, fold, drop_if)
        snapshot = keyed_writes.rewrite_snapshot(path, self.rewrite_below_bytes)
        self.fence(f"write state {self.stage}/{descriptor.name}")
        try:
            if snapshot is None:
                keyed_writes.merge(
                    self.spark, path, clauses, expire_unmatched=clauses.expire_unmatched and self._may_hold_expired(path)
                )
            else:
                if not unique:
                    clauses = replace(clauses, source=self._refuse_duplicate_keys(descriptor, clauses.source))
                keyed_writes.rewrite(self.spark, path, snapshot, keyed_table_schema(descriptor), clauses)
        except Exception as exc:  # noqa: BLE001 - translate the duplicate-key errors (ours and Delta's)
            self._raise_duplicates(descriptor, exc)
            raise

    def _clauses(
        self, descriptor: KeyedStateDescriptor, source: DataFrame, fold: Fold | None,
        drop_if: Callable[[Column], Column] | None,
    ) -> keyed_writes.WriteClauses:
        """The write's rows (``s``) and its clauses, as expressions over target ``t`` and source ``s``."""
        dtype = descriptor.stored_type
        expired = self._expired("t.")
        if fold is None:
            src = self._state_rows(descriptor, source)
            matched = inserted = F.col("s.value")
        else:
            src = self._state_rows(descriptor, source, extra=("new",))
            old = F.when(expired, F.lit(None)).otherwise(F.col("t.value")).cast(dtype)
            matched = fold(old, F.col("s.new")).cast(dtype)
            inserted = fold(F.lit(None).cast(dtype), F.col("s.new")).cast(dtype)
        delete = F.col(f"s.{_DELETE}")
        changed = ~(normal_column(F.col("t.value"), dtype).eqNullSafe(normal_column(matched, dtype)))
        if descriptor.ttl is not None:
            changed = changed | F.lit(True)  # every write restarts the TTL clock
        return keyed_writes.WriteClauses(
            source=src,
            matched=matched,
            inserted=inserted,
            delete=delete | drop_if(matched) if drop_if else delete,
            update=~delete & (changed | expired),
            insert=~delete & ~drop_if(inserted) if drop_if else ~delete,
            expired=expired,
            expire_unmatched=descriptor.ttl is not None,
        )

    def _raise_duplicates(self, descriptor: KeyedStateDescriptor, exc: Exception) -> None:
        """Raise :class:`StateSchemaError` if ``exc`` is a duplicate-key failure (ours or Delta's), or a null key
        refused by the table's ``NOT NULL`` key column."""
        error = keyed_writes.refused_rows(str(exc), self._writing(descriptor), self._duplicate_message(descriptor),
                                          descriptor.name)
        if error is not None:
            raise error from exc
        # Any other failure of the write's job (a value that does not cast, a reduce that raises): the stage's error
        # names the state being written (probe 16: it named neither the state nor the user's line)
        exc.epochal_state = f"{self.stage}/{descriptor.name}"  # type: ignore[attr-defined]

    def _may_hold_expired(self, path: str) -> bool:
        """False when the table's statistics prove that no row has expired at the epoch clock.

        Then the MERGE needs no ``WHEN NOT MATCHED BY SOURCE`` cleanup clause, which would
        make it join every row of the state instead of only those of the batch's keys.
        """
        return delta_io.may_hold_at_or_before(path, "expires_at", self.context.now)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self, descriptor: KeyedStateDescriptor, *, parallelism: int | None = None) -> StateHandle:
        """A handle on the table's current Delta version (cheap: metadata plus a row count)."""
        path = self.open(descriptor)
        return snapshot_table(
            self.spark, path, stage=self.stage, state=descriptor.name, kind=StateKind.KEYED,
            state_type=descriptor.state_type.value, max_parallelism=self.max_parallelism, parallelism=parallelism,
        )

    def restore(self, descriptor: KeyedStateDescriptor, handle: StateHandle) -> None:
        """Bring the working table back to the content of ``handle`` (same table: Delta RESTORE)."""
        if handle.max_parallelism is not None and handle.max_parallelism != self.max_parallelism:
            raise MaxParallelismMismatch(
                f"snapshot of {handle.key} has max parallelism {handle.max_parallelism}, backend has {self.max_parallelism}",
                action="restore with the max parallelism the state was created with",
            )
        self.fence(f"restore state {self.stage}/{descriptor.name}")
        restore_table(self.spark, self.table_path(descriptor), handle)
        self._opened.discard(self.table_path(descriptor))
        self.open(descriptor)

