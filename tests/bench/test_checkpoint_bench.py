"""The checkpoint bench's simulation on a case worked by hand: a training job arrives on a full
pool of two batch jobs. The older one checkpointed a minute ago; the newer one started 20
minutes ago and never checkpoints. Newest-first takes the newer and loses its 20 minutes;
checkpoint-aware takes the older and loses one minute. Both resume and finish."""

from __future__ import annotations

from bench.checkpoint_bench import Job, cost_order, newest_first, simulate

OLD = Job(1, arrival=0, runtime=7200, milli=1000, priority="batch", interval=600)
NEW = Job(2, arrival=1500, runtime=7200, milli=1000, priority="batch", interval=0)
# At 2,760 s: OLD has run 2,760 s and checkpointed at 2,400 s (6 min ago); NEW has run 1,260 s.
URGENT = Job(3, arrival=2760, runtime=600, milli=1000, priority="training", interval=0)


def test_checkpoint_aware_preemption_loses_the_least_work_since_the_last_checkpoint() -> None:
    ours = simulate([OLD, NEW, URGENT], gpus=2, order=cost_order)
    theirs = simulate([OLD, NEW, URGENT], gpus=2, order=newest_first)
    assert ours.preemptions == theirs.preemptions == 1
    assert round(ours.lost_gpu_hours * 3600) == 360  # OLD's 6 minutes since its checkpoint
    assert round(theirs.lost_gpu_hours * 3600) == 1260  # all of NEW's 21 minutes
    assert ours.finished == theirs.finished == 3


def test_a_resumed_job_runs_only_what_its_checkpoint_did_not_save() -> None:
    """OLD is preempted at 2,760 s with 2,400 s saved, waits for URGENT (600 s), and resumes
    for its remaining 4,800 s: nothing else runs, so the last end is at 3,360 + 4,800 s."""
    alone = [OLD, URGENT]
    out = simulate(alone, gpus=1, order=cost_order)
    assert out.preemptions == 1 and out.finished == 2
    assert round(out.lost_gpu_hours * 3600) == 360
    assert out.last_end == 2760 + 600 + (7200 - 2400)
