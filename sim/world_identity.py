"""Users, tokens, organisations, Apps and installations, rate-limit budgets and repository roles."""

from __future__ import annotations

import hashlib
import uuid

from sim.models import PERMISSIONS, App, Budget, Installation, SimError, TokenInfo, User
from sim.world_hooks import Hooks


class Identity(Hooks):
    def add_user(
        self, login: str, type: str = "User", name: str | None = None, email: str | None = None
    ) -> User:
        with self.lock:
            if login in self.users:
                return self.users[login]
            u = User(login, self.next_id(), type, name or login, email or f"{login}@users.sim")
            self.users[login] = u
            return u

    def user(self, login: str) -> User:
        u = self.users.get(login)
        if u is None:
            raise SimError(404, f"user {login!r} not found")
        return u

    def add_token(
        self,
        token: str,
        login: str | None = None,
        installation_id: int | None = None,
        expires_at: float | None = None,
    ) -> TokenInfo:
        with self.lock:
            if login is not None:
                self.add_user(login)
            info = TokenInfo(token, login, installation_id, expires_at)
            self.tokens[token] = info
            return info

    def add_org(self, org: str) -> None:
        with self.lock:
            self.add_user(org, type="Organization")
            self.orgs.setdefault(org, {"members": set(), "teams": {}})

    def add_org_member(self, org: str, login: str, team: str | None = None, role: str = "member") -> None:
        with self.lock:
            self.add_org(org)
            self.add_user(login)
            self.orgs[org]["members"].add(login)
            if team:
                self.orgs[org]["teams"].setdefault(team, {})[login] = role

    def add_app(self, app_id: int, slug: str, public_key_pem: str, owner: str) -> App:
        with self.lock:
            app = App(app_id, slug, slug, owner, public_key_pem)
            self.apps[app_id] = app
            self.add_user(f"{slug}[bot]", type="Bot")
            return app

    def add_installation(
        self, app_id: int, account: str, repos: list[str], installation_id: int | None = None
    ) -> Installation:
        with self.lock:
            if app_id not in self.apps:
                raise SimError(404, f"app {app_id} not registered")
            inst = Installation(installation_id or self.next_id(), app_id, account, list(repos), self.now())
            self.installations[inst.id] = inst
            for r in repos:
                if r in self.repos:
                    self.repos[r].installation_id = inst.id
            return inst

    def issue_installation_token(self, installation_id: int) -> TokenInfo:
        with self.lock:
            if installation_id not in self.installations:
                raise SimError(404, "Not Found")
            token = "ghs_" + hashlib.sha256(f"{installation_id}:{uuid.uuid4()}".encode()).hexdigest()[:36]
            expires = self.now() + self.settings.installation_token_ttl
            return self.add_token(token, installation_id=installation_id, expires_at=expires)

    def budget(self, key: str) -> Budget:
        b = self.budgets.get(key)
        now = self.now()
        if b is None or now >= b.reset:
            limit = self.settings.rate_limit if not key.startswith("anon:") else 60
            b = Budget(limit, 0, now + 3600)
            self.budgets[key] = b
        return b

    def add_custom_role(self, name: str, base_role: str) -> None:
        """An organisation's custom repository role, inheriting ``base_role``'s permissions."""
        if base_role not in PERMISSIONS[:-1]:
            raise SimError(422, f"base_role must be one of {', '.join(PERMISSIONS[:-1])}")
        with self.lock:
            self.custom_roles[name] = base_role

    def base_role(self, role: str) -> str:
        return self.custom_roles.get(role, role)

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        if permission not in PERMISSIONS and permission not in self.custom_roles:
            raise SimError(
                422, f"permission must be one of {', '.join(PERMISSIONS)} or a custom role added first"
            )
        with self.lock:
            self.add_user(login)
            self.repo(full_name).collaborators[login] = permission

    def role(self, full_name: str, login: str) -> str:
        """The assigned role, a custom role's own name included (the API's ``role_name``)."""
        with self.lock:
            repo = self.repo(full_name)
            if login == repo.owner:
                return "admin"
            return repo.collaborators.get(login, "read" if not repo.private else "none")

    def permission(self, full_name: str, login: str) -> str:
        """The base role (a custom role resolves to the role it inherits)."""
        return self.base_role(self.role(full_name, login))
