"""The archive's pure decisions: how much of a log is kept, which replica a pod runs, how
events from several passes merge, and what a download is called."""

from __future__ import annotations

from typing import Any

import pytest

from apps.orchestration import archive
from apps.orchestration import manifests as m


def lines(count: int, width: int = 40) -> list[str]:
    return [f"{i:05d} " + "x" * (width - 6) for i in range(count)]


def test_a_log_within_the_cap_is_kept_whole() -> None:
    kept = archive.keep_tail(["a", "b", "c"], max_bytes=1024)
    assert kept == archive.CappedLog("a\nb\nc\n", truncated=False)
    assert kept.bytes == 6


def test_a_long_log_keeps_its_end_in_whole_lines_and_says_it_was_truncated() -> None:
    log = lines(100)  # 100 lines of 41 bytes with the newline
    kept = archive.keep_tail(log, max_bytes=1000)
    assert kept.truncated
    assert kept.bytes <= 1000
    assert kept.text.splitlines() == log[-24:]  # 24 × 41 = 984 bytes; 25 would not fit


def test_a_single_line_longer_than_the_cap_keeps_its_end_on_a_character_boundary() -> None:
    kept = archive.keep_tail(["start", "é" * 100 + "END"], max_bytes=11)
    assert kept.truncated
    assert kept.text.endswith("END\n")
    assert kept.bytes <= 11
    assert kept.text == "é" * 3 + "END\n"  # 3 × 2 bytes + 4; a half "é" is dropped


def test_getting_as_many_lines_as_asked_means_earlier_ones_may_exist() -> None:
    assert archive.keep_tail(["a", "b"], max_bytes=100, asked_lines=2).truncated
    assert not archive.keep_tail(["a"], max_bytes=100, asked_lines=2).truncated


def test_the_lines_asked_for_always_hold_the_cap_of_timestamped_lines() -> None:
    cap = 1024 * 1024
    shortest = "2025-01-01T12:00:05Z "  # the kubelet's timestamp, nothing after it
    assert len(shortest) + 1 == archive.SHORTEST_LINE_BYTES
    assert archive.lines_for_cap(cap) * archive.SHORTEST_LINE_BYTES > cap


def test_the_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        archive.keep_tail(["a"], max_bytes=0)


def pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Any:
    return {"metadata": {"name": "p", "labels": labels or {}, "annotations": annotations or {}}}


def test_the_replica_of_a_pod_comes_from_its_index_or_trial() -> None:
    assert archive.replica_of(pod(annotations={archive.ANNOTATION_COMPLETION_INDEX: "3"})) == 3
    assert archive.replica_of(pod(labels={archive.ANNOTATION_COMPLETION_INDEX: "1"})) == 1
    assert archive.replica_of(pod(labels={m.LABEL_SWEEP_POINT: "7"})) == 7
    assert archive.replica_of(pod(labels={archive.LABEL_POD_INDEX: "0"})) == 0
    assert archive.replica_of(pod()) == 0
    assert archive.replica_of(pod(labels={m.LABEL_SWEEP_POINT: "not-a-number"})) == 0


def event(reason: str, count: int, time: str, message: str = "m") -> dict[str, Any]:
    return {
        "time": time,
        "type": "Normal",
        "reason": reason,
        "message": message,
        "object": "Pod/wl-1-abc",
        "count": count,
    }


def test_events_read_twice_are_kept_once_with_their_latest_count() -> None:
    first = [
        event("Scheduled", 1, "2025-01-01T12:00:00+00:00"),
        event("BackOff", 1, "2025-01-01T12:00:05+00:00"),
    ]
    second = [
        event("BackOff", 4, "2025-01-01T12:01:00+00:00"),
        event("Killing", 1, "2025-01-01T12:02:00+00:00"),
    ]
    merged = archive.merge_events(first, second)
    assert [(e["reason"], e["count"]) for e in merged] == [
        ("Scheduled", 1),
        ("BackOff", 4),
        ("Killing", 1),
    ]
    assert archive.merge_events(merged, second) == merged


def test_a_download_is_named_by_numbers_only() -> None:
    assert archive.log_filename(42, 0) == "workload-42-replica-0.log"
    assert archive.log_filename(42, 1, 1) == "workload-42-replica-1.log"
    assert archive.log_filename(42, 1, 3) == "workload-42-replica-1-attempt-3.log"


def test_sizes_read_in_words() -> None:
    assert archive.size_label(1024 * 1024) == "1 MiB"
    assert archive.size_label(1536) == "1.5 KiB"
    assert archive.size_label(300) == "300 bytes"
    assert "last 1 MiB" in archive.truncation_notice(1024 * 1024)
