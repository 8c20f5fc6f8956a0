"""Every write of accounts, by concern: ``teams`` (teams and memberships), ``users`` (the
admin's user and group screens), ``signin`` (the identity provider's users and groups),
``sessions`` (portal sessions, back-channel logout), ``tokens`` (API tokens) and ``password``
(the admin's password sign-in and the break-glass link). Their names are importable from here."""

from apps.accounts.services.password import (
    ADMIN_SIGNIN_LINK_SALT as ADMIN_SIGNIN_LINK_SALT,
)
from apps.accounts.services.password import (
    ADMIN_SIGNIN_LINK_SECONDS as ADMIN_SIGNIN_LINK_SECONDS,
)
from apps.accounts.services.password import (
    admin_login_failure_record as admin_login_failure_record,
)
from apps.accounts.services.password import (
    admin_login_success_record as admin_login_success_record,
)
from apps.accounts.services.password import (
    admin_signin_link_create as admin_signin_link_create,
)
from apps.accounts.services.password import (
    admin_signin_link_use as admin_signin_link_use,
)
from apps.accounts.services.sessions import (
    _end_sessions as _end_sessions,
)
from apps.accounts.services.sessions import (
    _session_store as _session_store,
)
from apps.accounts.services.sessions import (
    oidc_backchannel_logout as oidc_backchannel_logout,
)
from apps.accounts.services.sessions import (
    user_session_record as user_session_record,
)
from apps.accounts.services.sessions import (
    user_sessions_end as user_sessions_end,
)
from apps.accounts.services.signin import (
    LinkPolicy as LinkPolicy,
)
from apps.accounts.services.signin import (
    LinkRefused as LinkRefused,
)
from apps.accounts.services.signin import (
    _free_username as _free_username,
)
from apps.accounts.services.signin import (
    _log_groups as _log_groups,
)
from apps.accounts.services.signin import (
    _revoke_all_tokens as _revoke_all_tokens,
)
from apps.accounts.services.signin import (
    _sync_provider_groups as _sync_provider_groups,
)
from apps.accounts.services.signin import (
    user_groups_confirm as user_groups_confirm,
)
from apps.accounts.services.signin import (
    user_groups_lapse as user_groups_lapse,
)
from apps.accounts.services.signin import (
    user_sync_oidc as user_sync_oidc,
)
from apps.accounts.services.teams import (
    PROVIDER_OWNS_MEMBERSHIP as PROVIDER_OWNS_MEMBERSHIP,
)
from apps.accounts.services.teams import (
    _team_conflicts as _team_conflicts,
)
from apps.accounts.services.teams import (
    membership_remove as membership_remove,
)
from apps.accounts.services.teams import (
    membership_set as membership_set,
)
from apps.accounts.services.teams import (
    team_create as team_create,
)
from apps.accounts.services.teams import (
    team_delete as team_delete,
)
from apps.accounts.services.teams import (
    team_update as team_update,
)
from apps.accounts.services.teams import (
    team_validate as team_validate,
)
from apps.accounts.services.tokens import (
    api_token_create as api_token_create,
)
from apps.accounts.services.tokens import (
    api_token_revoke as api_token_revoke,
)
from apps.accounts.services.tokens import (
    api_token_touch as api_token_touch,
)
from apps.accounts.services.users import (
    ACCESS_FIELDS as ACCESS_FIELDS,
)
from apps.accounts.services.users import (
    PRIVILEGE_FIELDS as PRIVILEGE_FIELDS,
)
from apps.accounts.services.users import (
    _permission_names as _permission_names,
)
from apps.accounts.services.users import (
    _user_state as _user_state,
)
from apps.accounts.services.users import (
    group_delete as group_delete,
)
from apps.accounts.services.users import (
    group_save as group_save,
)
from apps.accounts.services.users import (
    oidc_identity_delete as oidc_identity_delete,
)
from apps.accounts.services.users import (
    user_admin_save as user_admin_save,
)
from apps.accounts.services.users import (
    user_delete as user_delete,
)
from apps.accounts.services.users import (
    user_password_set as user_password_set,
)
