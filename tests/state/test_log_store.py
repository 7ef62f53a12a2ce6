"""Delta commits to local paths through Delta's LocalLogStore (no FileContext, no ``readlink`` processes); other
schemes keep Delta's own choice."""

from __future__ import annotations


def _store(spark, path: str) -> str:
    jvm = spark.sparkContext._jvm
    delegating = jvm.org.apache.spark.sql.delta.storage.LogStore.apply(spark._jsparkSession)
    return str(delegating.getDelegate(jvm.org.apache.hadoop.fs.Path(path)).logStoreImpl().getClass().getName())


def test_local_paths_commit_through_the_local_log_store_and_s3_keeps_deltas_own(spark, tmp_path):
    assert _store(spark, f"file://{tmp_path}/t/_delta_log") == "io.delta.storage.LocalLogStore"
    assert _store(spark, "s3a://bucket/t/_delta_log") == "io.delta.storage.S3SingleDriverLogStore"


def test_a_version_already_written_is_refused_and_left_as_it_was(spark, tmp_path):
    """The log store's check that the version is free: a second writer of version 1 fails, version 1 stays."""
    from py4j.protocol import Py4JJavaError

    table = str(tmp_path / "t")
    spark.range(1).write.format("delta").save(table)
    spark.range(2).write.format("delta").mode("append").save(table)
    commit = tmp_path / "t" / "_delta_log" / f"{1:020d}.json"
    before = commit.read_bytes()
    jvm = spark.sparkContext._jvm
    store = jvm.org.apache.spark.sql.delta.storage.LogStore.apply(spark._jsparkSession)
    actions = jvm.java.util.ArrayList()
    actions.add('{"commitInfo":{}}')
    lines = jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions)
    try:
        store.write(jvm.org.apache.hadoop.fs.Path(f"file://{commit}"), lines.iterator(), False,
                    spark.sparkContext._jsc.hadoopConfiguration())
        raise AssertionError("a second write of version 1 went through")
    except Py4JJavaError as exc:
        assert "FileAlreadyExistsException" in str(exc.java_exception.getClass().getName())
    assert commit.read_bytes() == before
    assert spark.read.format("delta").load(table).count() == 3
