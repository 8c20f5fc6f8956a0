"""Development: the README's run command. DEBUG on, demo sign-in when OIDC is off."""

from __future__ import annotations

from gpupaas.settings import base
from gpupaas.settings.env import env_bool, env_optional_str, inherit

inherit(base, globals())

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = env_optional_str("SECRET_KEY") or "dev-only-insecure-key-never-used-in-production"
DEV_LOGIN_ENABLED = DEBUG and not base.OIDC_ENABLED
DEV_LOGIN_USERS = ["alice", "bob", "carol", "dave", "admin"]
