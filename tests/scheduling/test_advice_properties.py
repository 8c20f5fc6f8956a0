"""Waiting explanations agree with the scheduler (hypothesis, on generated fleets and queues):
following a suggestion ("1 GPU of A100-HAMi would start now", "ask for 0.5 GPU instead") makes
the same cycle on the same snapshot admit the request, and no advice names a sharing mode the
request's shape cannot use (no MIG for a 2-GPU job, no fraction of a whole-GPU class)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from hypothesis import HealthCheck, event, given, settings

from apps.catalog import core as catalog_core
from apps.catalog.resources import charged_milli
from apps.scheduling.core import schedule
from apps.scheduling.data import Snapshot, TypicalRequest
from apps.scheduling.estimate import shape_fits
from tests.scheduling.builders import CLASSES
from tests.scheduling.test_properties import POLICY, scenarios

BY_NAME = {c.name: c for c in CLASSES}
# The fragmentation model's request shapes, fixed so that both runs see the same snapshot.
TYPICAL = MappingProxyType({c.name: (TypicalRequest(1000, 1, 1000),) for c in CLASSES})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_following_a_suggestion_gets_the_request_admitted_on_the_same_snapshot(
    pair: tuple[Snapshot, Snapshot],
) -> None:
    snap = replace(pair[1], typical=TYPICAL)
    result = schedule(snap, POLICY)
    admitted = {a.workload_id for a in result.admissions}
    by_id = {w.id: w for w in snap.waiting}
    for info in result.waiting:
        w = by_id[info.workload_id]
        assert info.workload_id not in admitted
        for s in info.suggestions:
            event(f"suggestion: {'same class' if s.gpu_class == w.gpu_class else 'other class'}")
            assert s.text in info.advice
            gpu_class = BY_NAME[s.gpu_class]
            followed = replace(
                w,
                gpu_class=s.gpu_class,
                gpu_milli=s.gpu_milli,
                charged_milli=charged_milli(s.gpu_milli, gpu_class),
            )
            again = replace(
                snap, waiting=tuple(followed if x.id == w.id else x for x in snap.waiting)
            )
            rerun = schedule(again, POLICY)
            assert w.id in {a.workload_id for a in rerun.admissions}, (info, s)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_advice_names_a_sharing_mode_the_shape_cannot_use(
    pair: tuple[Snapshot, Snapshot],
) -> None:
    snap = pair[1]
    result = schedule(snap, POLICY)
    by_id = {w.id: w for w in snap.waiting}
    mig = [c.name for c in CLASSES if c.sharing_mode == catalog_core.SHARING_MIG]
    for info in result.waiting:
        w = by_id[info.workload_id]
        for s in info.suggestions:
            assert shape_fits(BY_NAME[s.gpu_class], s.gpu_milli), s
            if w.gpu_milli > 1000 or w.replicas > 1:
                assert s.gpu_class not in mig, (w, s)
        if w.gpu_milli > 1000 or w.replicas > 1:
            for line in info.advice:
                assert not any(name in line for name in mig), (w, line)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_the_estimate_and_the_reason_agree(pair: tuple[Snapshot, Snapshot]) -> None:
    """A waiting workload has an estimated start exactly when its reason does not say that
    there is none (or that no amount of freed capacity can start it as asked)."""
    result = schedule(pair[1], POLICY)
    for info in result.waiting:
        no_estimate = "No estimate" in info.reason or "in all: ask for fewer" in info.reason
        assert (info.estimated_start is None) == no_estimate, info
        if info.estimated_start is not None:
            assert info.estimated_start >= pair[1].now
