"""Governance: how long quota grants and reservations may last, which bookings wait for an
admin, and how often their starts and ends are acted on."""

from __future__ import annotations

from gpupaas.settings.env import env_int

# The longest period a quota request may ask for, in days.
QUOTA_GRANT_MAX_DAYS = env_int("QUOTA_GRANT_MAX_DAYS", 90, minimum=1)
# The longest reservation window, in days.
RESERVATION_MAX_DAYS = env_int("RESERVATION_MAX_DAYS", 14, minimum=1)
# Bookings of more than this many GPUs wait for a platform admin's approval (0: every booking).
RESERVATION_APPROVAL_THRESHOLD_GPUS = env_int("RESERVATION_APPROVAL_THRESHOLD_GPUS", 8, minimum=0)
# How often grants and reservations that started or ended are acted on (cluster quota refreshed,
# audited, people told), in seconds. The scheduler itself reads them at every cycle.
GOVERNANCE_BOUNDARY_SECONDS = env_int("GOVERNANCE_BOUNDARY_SECONDS", 30, minimum=5)
