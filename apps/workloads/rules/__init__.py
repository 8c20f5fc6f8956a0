"""What a workload request may be: the one rule set of every door. Pure.

The portal form, the API serializer and the CLI (through the API's dry run) only parse what
the user typed into a :class:`WorkloadRequest` (:mod:`apps.workloads.request`, the one value
every door builds and ``workload_submit`` takes whole); ``workload_submit`` reads the
:class:`Context` (who asks, the GPU class, the image, the class's nodes, the team's quota)
and asks :func:`request_problems`, whose answer — field → message — is what every door
shows. The same request is therefore accepted or refused with the same message whatever
the door (DESIGN.md, "Accounting").

The rules, by field:

- ``kind``: notebook, training or sweep.
- ``name``: 1–100 characters, no control characters, no invisible formatting characters
  (bidirectional overrides and isolates, zero-width marks, line separators).
- ``gpu_milli`` per replica: a positive whole number of milli-GPU; more than one GPU only
  in whole GPUs; per sharing mode: ``whole`` gives whole GPUs only (a fraction is refused
  with the rounded-up amount to ask for), ``mig`` at most one GPU and a profile of the class
  must hold it, ``timeslice`` and ``hami`` take any fraction. No node of the class may be
  too small for one replica, and the request may not exceed the team's limit or the
  per-user cap.
- ``replicas``: notebooks one; training jobs 1–64 nodes, fractions for one replica only;
  sweeps one replica per point of the grid, derived (each trial its own unit, charged).
- ``grid`` (sweeps only): 1–256 points; parameter names as environment variable names
  (each point sees SWEEP_<NAME>), distinct in any case; values of up to 256 characters.
- ``env``: at most 64 variables and 32 KiB; names ``[A-Za-z_][A-Za-z0-9_]*`` (ASCII), not
  the GPU runtime's or the platform's (NVIDIA_*, CUDA_VISIBLE_DEVICES, LD_PRELOAD,
  GPUPAAS_*, …), nor SWEEP_* in a sweep.
- ``ranges`` and ``samples`` (sweeps only, instead of a grid): ``samples`` (1–256) points drawn
  from ``name: [low, high]`` or ``[low, high, scale]`` (scale linear, log or int; log needs
  low > 0) by a generator seeded with ``seed`` (0 to 2³²−1; recorded, drawn when absent).
- ``parallelism`` (sweeps only): trials that run at once, 1 to the number of trials (default
  4, at most the trials); what runs at once must fit the team's limit and the per-user cap.
- ``command``/``args``: a notebook takes neither; a training job or sweep needs a command. In a
  sweep, ``{name}`` puts a parameter's value in (each trial's own argv; shell-quoted inside the
  script of ``sh -c``): every such name must be a parameter of the sweep, and a literal brace
  is written twice (``{{``, ``}}``).
- ``max_runtime_seconds`` 1 minute – 30 days, ``idle_timeout_seconds`` 5 minutes – 7 days,
  ``retries`` 0–10.
- ``secrets``: at most 16 references to secrets of the team (DESIGN.md, "Data and secrets"),
  each ``{name, env, key}``: ``env`` set, the variable takes the value of ``key`` (which may be
  left out when the secret has one key); ``env`` left out, every key of the secret becomes a
  variable of its name. A team secret any member may use; a personal secret only its owner
  (a clone of a teammate's request that uses one is refused). Variable names follow the
  ``env`` rules and may not repeat a plain variable or another reference.
- ``datasets``: at most 16 names of datasets registered for the team (DESIGN.md, "Data and
  secrets"), each once; a claim dataset is mounted read-only at /datasets/<name>, an
  object-store dataset is named in the environment. A name the team has not registered (another
  team's dataset included) is refused.
- ``priority_class``: members up to their kind's class (development for notebooks, training
  for jobs, batch for sweeps); team leads and admins any class, production included.

By concern: ``limits`` (the numbers and messages), ``facts`` (what the rules read, the Context
and the Charge), ``check`` (the rule set and the charge), ``fields`` (one rule per field),
``capacity`` (could any cycle admit it), ``references`` (secrets and datasets) and ``endpoints``
(an inference endpoint's own rules). Their names, and the request value's
(:mod:`apps.workloads.request`), are importable from here.
"""

from apps.workloads.request import (
    DEFAULT_ENDPOINT_PORT,
    DEFAULT_HEALTH_PATH,
    DEFAULT_SCALE_TARGETS,
    SCALE_GPU,
    SCALE_METRICS,
    SCALE_RPS,
    EndpointRequest,
    SecretRef,
    WorkloadRequest,
    scale_target_of,
)
from apps.workloads.rules.capacity import (
    capacity_problems,
    mig_profile_for,
    no_quota_advice,
    sharing_problem,
)
from apps.workloads.rules.check import (
    MAX_SEED,
    PARALLELISM_INVALID,
    REQUEUE_NOT_BOOLEAN,
    SAMPLES_INVALID,
    SEED_INVALID,
    charge_of,
    governance_problems,
    parallelism_of,
    parallelism_problem,
    ranges_problem,
    recorded_endpoint,
    replicas_of,
    request_problems,
    sampling_problems,
)
from apps.workloads.rules.endpoints import (
    endpoint_of,
    endpoint_problems,
    guarantee_problem,
    model_path_problem,
    model_uri_problem,
)
from apps.workloads.rules.facts import (
    Charge,
    Context,
    DatasetFacts,
    GpuClassFacts,
    ImageFacts,
    NodeFacts,
    QuotaFacts,
    SecretFacts,
    charged_milli_of,
    class_spec_of,
    grid_points,
    priority_of,
    put_problem,
)
from apps.workloads.rules.fields import (
    amount_problems,
    catalog_problems,
    command_problems,
    env_name_problem,
    env_problem,
    grid_problem,
    image_availability_problem,
    image_suits,
    limit_problems,
    name_problem,
    placeholder_problems,
    priority_problem,
    sweep_parameters,
)
from apps.workloads.rules.limits import (
    AMOUNT_NOT_WHOLE,
    COMMAND_MISSING,
    DATASETS_MOUNT,
    DEFAULT_PARALLELISM,
    DEFAULT_RESERVED_ENV,
    DEFAULT_RESERVED_ENV_PATTERNS,
    ENDPOINT_PORTS,
    ENDPOINT_PRIORITY_MEMBERS,
    ENV_NAME_RE,
    GRID_MISSING,
    HEALTH_PATH_RE,
    HIDDEN_CATEGORIES,
    IDLE_MINUTES,
    IDLE_TIMEOUT_OUT_OF_RANGE,
    IDLE_TIMEOUT_SECONDS,
    IMAGE_NOTEBOOK,
    IMAGE_SERVING,
    IMAGE_TRAINING,
    KIND_LABELS,
    MAX_DATASET_REFS,
    MAX_ENDPOINT_REPLICAS,
    MAX_ENV_BYTES,
    MAX_ENV_VARS,
    MAX_GPU_MILLI,
    MAX_GRID_POINTS,
    MAX_GRID_VALUE_LENGTH,
    MAX_HEALTH_PATH_LENGTH,
    MAX_MODEL_REF_LENGTH,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_SECRET_REFS,
    MAX_WORD_LENGTH,
    MAX_WORDS,
    MILLI,
    MODEL_URI_SCHEMES,
    NAME_MISSING,
    PLATFORM_ENV_PREFIX,
    REPLICAS_NOT_WHOLE,
    RETRIES,
    RETRIES_OUT_OF_RANGE,
    RUNTIME_OUT_OF_RANGE,
    RUNTIME_SECONDS,
    SCALE_TARGET_BOUNDS,
    SECRET_SCOPES,
    SUBMITTABLE_KINDS,
    SWEEP_ENV_PREFIX,
    TEAM_VOLUME_MOUNT,
    ReservedEnv,
)
from apps.workloads.rules.references import (
    dataset_of,
    datasets_problem,
    resolved_datasets,
    resolved_secrets,
    secret_env_names,
    secret_of,
    secret_ref_problem,
    secrets_problem,
)

__all__ = [
    "AMOUNT_NOT_WHOLE",
    "COMMAND_MISSING",
    "DATASETS_MOUNT",
    "DEFAULT_ENDPOINT_PORT",
    "DEFAULT_HEALTH_PATH",
    "DEFAULT_PARALLELISM",
    "DEFAULT_RESERVED_ENV",
    "DEFAULT_RESERVED_ENV_PATTERNS",
    "DEFAULT_SCALE_TARGETS",
    "ENDPOINT_PORTS",
    "ENDPOINT_PRIORITY_MEMBERS",
    "ENV_NAME_RE",
    "GRID_MISSING",
    "HEALTH_PATH_RE",
    "HIDDEN_CATEGORIES",
    "IDLE_MINUTES",
    "IDLE_TIMEOUT_OUT_OF_RANGE",
    "IDLE_TIMEOUT_SECONDS",
    "IMAGE_NOTEBOOK",
    "IMAGE_SERVING",
    "IMAGE_TRAINING",
    "KIND_LABELS",
    "MAX_DATASET_REFS",
    "MAX_ENDPOINT_REPLICAS",
    "MAX_ENV_BYTES",
    "MAX_ENV_VARS",
    "MAX_GPU_MILLI",
    "MAX_GRID_POINTS",
    "MAX_GRID_VALUE_LENGTH",
    "MAX_HEALTH_PATH_LENGTH",
    "MAX_MODEL_REF_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_SECRET_REFS",
    "MAX_SEED",
    "MAX_WORDS",
    "MAX_WORD_LENGTH",
    "MILLI",
    "MODEL_URI_SCHEMES",
    "NAME_MISSING",
    "PARALLELISM_INVALID",
    "PLATFORM_ENV_PREFIX",
    "REPLICAS_NOT_WHOLE",
    "REQUEUE_NOT_BOOLEAN",
    "RETRIES",
    "RETRIES_OUT_OF_RANGE",
    "RUNTIME_OUT_OF_RANGE",
    "RUNTIME_SECONDS",
    "SAMPLES_INVALID",
    "SCALE_GPU",
    "SCALE_METRICS",
    "SCALE_RPS",
    "SCALE_TARGET_BOUNDS",
    "SECRET_SCOPES",
    "SEED_INVALID",
    "SUBMITTABLE_KINDS",
    "SWEEP_ENV_PREFIX",
    "TEAM_VOLUME_MOUNT",
    "Charge",
    "Context",
    "DatasetFacts",
    "EndpointRequest",
    "GpuClassFacts",
    "ImageFacts",
    "NodeFacts",
    "QuotaFacts",
    "ReservedEnv",
    "SecretFacts",
    "SecretRef",
    "WorkloadRequest",
    "amount_problems",
    "capacity_problems",
    "catalog_problems",
    "charge_of",
    "charged_milli_of",
    "class_spec_of",
    "command_problems",
    "dataset_of",
    "datasets_problem",
    "endpoint_of",
    "endpoint_problems",
    "env_name_problem",
    "env_problem",
    "governance_problems",
    "grid_points",
    "grid_problem",
    "guarantee_problem",
    "image_availability_problem",
    "image_suits",
    "limit_problems",
    "mig_profile_for",
    "model_path_problem",
    "model_uri_problem",
    "name_problem",
    "no_quota_advice",
    "parallelism_of",
    "parallelism_problem",
    "placeholder_problems",
    "priority_of",
    "priority_problem",
    "put_problem",
    "ranges_problem",
    "recorded_endpoint",
    "replicas_of",
    "request_problems",
    "resolved_datasets",
    "resolved_secrets",
    "sampling_problems",
    "scale_target_of",
    "secret_env_names",
    "secret_of",
    "secret_ref_problem",
    "secrets_problem",
    "sharing_problem",
    "sweep_parameters",
]
