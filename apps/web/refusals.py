"""What a signed-in person is told when the portal refuses a page (403) or finds nothing they
may see (404): why, whose it is, and whom to ask.

A 403 meets someone who may see the object but not do this to it (a teammate opening another
member's notebook, a member on a lead's page): they learn its team, its owner and the team's
leads. A 404 must not tell an outsider that another team's object exists, so it names no object:
it points to the person's own teams and their leads, who can add them to a team or find the
link's owner."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import HttpRequest
from django.urls import Resolver404, resolve

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import memberships_of, platform_may, team_leads
from apps.workloads.selectors import workloads_visible_to

KIND_WORDS = {
    "notebook": "notebook",
    "training": "training job",
    "sweep": "sweep",
    "inference": "inference endpoint",
}


@dataclass(frozen=True)
class Contact:
    name: str
    email: str


@dataclass(frozen=True)
class TeamContacts:
    team: Team
    leads: list[Contact]


@dataclass(frozen=True)
class Refusal:
    """The explanation a refused page shows."""

    status: int
    message: str
    what: str = ""  # "the notebook “bert-finetune”" (403 only: an object they may see)
    owner: str = ""
    team: TeamContacts | None = None  # the object's team and its leads (403 only)
    own_teams: list[TeamContacts] = field(default_factory=list)  # whom else to ask

    @property
    def is_member_of_its_team(self) -> bool:
        return self.team is not None and any(t.team.pk == self.team.team.pk for t in self.own_teams)


def _contacts(team: Team) -> TeamContacts:
    leads = [Contact(str(u), u.email) for u in team_leads(team.pk)]
    return TeamContacts(team, leads)


def _object_of(request: HttpRequest, user: User) -> tuple[str, str, Team | None]:
    """What the refused URL names, when the person may see it: (what, owner, team)."""
    try:
        kwargs = resolve(request.path_info).kwargs
    except Resolver404:
        return "", "", None
    if "workload_id" in kwargs:
        workload = (
            workloads_visible_to(user)
            .select_related("team", "owner")
            .filter(pk=kwargs["workload_id"])
            .first()
        )
        if workload is None:
            return "", "", None
        kind = KIND_WORDS.get(workload.kind, "workload")
        owner = str(workload.owner)
        return f"the {kind} “{workload.name}”", owner, workload.team
    slug = kwargs.get("slug")
    if isinstance(slug, str) and request.path_info.startswith("/teams/"):
        team = Team.objects.filter(slug=slug).first()
        if team is not None and (
            platform_may(user, Act.SEE_TEAMS) or memberships_of(user).filter(team=team).exists()
        ):
            return f"the team {team.name}", "", team
    return "", "", None


def refusal_for(request: HttpRequest, *, status: int, message: str = "") -> Refusal:
    """The explanation of a refusal for the signed-in person making ``request``."""
    user = request.user
    assert isinstance(user, User)
    own = [_contacts(m.team) for m in memberships_of(user)]
    if status != 403:
        return Refusal(status=status, message=message, own_teams=own)
    what, owner, team = _object_of(request, user)
    return Refusal(
        status=status,
        message=message,
        what=what,
        owner=owner,
        team=_contacts(team) if team is not None else None,
        own_teams=own,
    )
