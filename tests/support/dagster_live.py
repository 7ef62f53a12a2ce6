"""Helpers for driving a live Dagster webserver over GraphQL (used by tests/orchestration/test_dagster_live.py)."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

TERMINAL_RUN = {"SUCCESS", "FAILURE", "CANCELED"}
TERMINAL_BACKFILL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _poll(status, terminal: set[str], deadline_s: float, what: str) -> str:
    """Poll ``status()`` until it is terminal (a deadline against hanging, not a timing assertion)."""
    end, last = time.monotonic() + deadline_s, None
    while time.monotonic() < end:
        last = status()
        if last in terminal:
            return last
        time.sleep(3)
    raise AssertionError(f"{what} not finished after {deadline_s}s (status {last})")


class GraphQL:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def __call__(self, query: str, **variables: Any) -> dict:
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise
            body = exc.read()
            try:
                payload = json.loads(body or b"{}")  # GraphQL reports its errors with a 500 status
            except ValueError:
                raise AssertionError(f"HTTP {exc.code} from {self.url}: {body[:2000]!r}") from exc
            if not payload.get("errors"):
                raise AssertionError(f"HTTP {exc.code} from {self.url}: {body[:2000]!r}") from exc
        if payload.get("errors"):
            raise AssertionError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def wait_ready(self, deadline_s: float, alive=lambda: True) -> None:
        """Poll until the webserver answers and the code location is loaded (a deadline, not a timing assertion)."""
        end = time.monotonic() + deadline_s
        last: Exception | None = None
        while time.monotonic() < end and alive():
            try:
                data = self("{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename ... on PythonError { message } } } } } }")
                entries = data["workspaceOrError"]["locationEntries"]
                kinds = [e["locationOrLoadError"]["__typename"] if e["locationOrLoadError"] else None for e in entries]
                if kinds and all(k == "RepositoryLocation" for k in kinds):
                    return
                if "PythonError" in kinds:
                    raise AssertionError(f"code location failed to load: {entries}")
            except (urllib.error.URLError, ConnectionError, OSError) as exc:
                last = exc
            time.sleep(2)
        raise AssertionError(f"Dagster webserver at {self.url} not ready: {last}")

    def launch_partition_run(self, job: str, partition: str) -> str:
        data = self(
            """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
                __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
                ... on InvalidSubsetError { message } ... on RunConfigValidationInvalid { errors { message } } } }""",
            params={
                "selector": {"repositoryLocationName": "epochal", "repositoryName": "__repository__", "jobName": job},
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
                "runConfigData": {},
            },
        )["launchRun"]
        assert data["__typename"] == "LaunchRunSuccess", data
        return data["run"]["runId"]

    def launch_job_backfill(self, job: str, partitions: list[str]) -> str:
        """A backfill of the job's partitions (the job's Partitions page): one run over the range, or runs of
        ``dagster.backfill_chunk`` partitions."""
        selector = {"partitionSetName": f"{job}_partition_set",
                    "repositorySelector": {"repositoryLocationName": "epochal", "repositoryName": "__repository__"}}
        return self._backfill({"selector": selector, "partitionNames": partitions})

    def launch_asset_backfill(self, asset_keys: list[str], partitions: list[str]) -> str:
        """An asset backfill (what the asset graph's Materialize over a range launches): one run over the range."""
        return self._backfill({"partitionNames": partitions, "assetSelection": [{"path": [k]} for k in asset_keys]})

    def _backfill(self, params: dict) -> str:
        data = self(
            """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
                __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
            params=params,
        )["launchPartitionBackfill"]
        assert data["__typename"] == "LaunchBackfillSuccess", data
        return data["backfillId"]

    def run_status(self, run_id: str) -> str:
        return self("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", id=run_id)["runOrError"]["status"]

    def wait_run(self, run_id: str, deadline_s: float) -> str:
        return _poll(lambda: self.run_status(run_id), TERMINAL_RUN, deadline_s, f"run {run_id}")

    def backfill_status(self, backfill_id: str) -> str:
        return self(
            "query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }",
            id=backfill_id,
        )["partitionBackfillOrError"]["status"]

    def wait_backfill(self, backfill_id: str, deadline_s: float) -> str:
        return _poll(lambda: self.backfill_status(backfill_id), TERMINAL_BACKFILL, deadline_s, f"backfill {backfill_id}")

    def runs_with_tag(self, key: str, value: str) -> list[dict]:
        data = self(
            """query($filter: RunsFilter) { runsOrError(filter: $filter) { ... on Runs { results {
                runId status startTime tags { key value } assetMaterializations { assetKey { path } partition } } } } }""",
            filter={"tags": [{"key": key, "value": value}]},
        )
        return data["runsOrError"]["results"]

    def backfill(self, backfill_id: str) -> dict:
        """A backfill's status, partitions and whether it is an asset backfill (as its page shows them)."""
        return self(
            """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
                id status isAssetBackfill partitionNames } } }""",
            id=backfill_id,
        )["partitionBackfillOrError"]

    def run(self, run_id: str) -> dict:
        data = self(
            """query($id: ID!) { runOrError(runId: $id) { ... on Run {
                runId status tags { key value } assetMaterializations { assetKey { path } partition } } } }""",
            id=run_id,
        )
        return data["runOrError"]

    def observations(self, run_id: str) -> list[dict]:
        """The run's asset observations: asset, partition and metadata (label to value; text, number or bool)."""
        data = self(
            """query($id: ID!) { logsForRun(runId: $id, limit: 100000) { ... on EventConnection { events {
                __typename ... on ObservationEvent { assetKey { path } partition metadataEntries { label
                ... on TextMetadataEntry { text } ... on BoolMetadataEntry { boolValue }
                ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue } } } } } } }""",
            id=run_id,
        )
        out = []
        for event in data["logsForRun"]["events"]:
            if event["__typename"] != "ObservationEvent":
                continue
            values = {m["label"]: next((m[k] for k in ("text", "boolValue", "intValue", "floatValue") if k in m), None)
                      for m in event["metadataEntries"]}
            out.append({"asset": "/".join(event["assetKey"]["path"]), "partition": event["partition"], "metadata": values})
        return out
