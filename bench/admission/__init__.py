"""The parts of the admission bench beside Kueue (bench/admission_bench.py runs them): jobs,
ours (gpupaas) and kueue."""
