"""The admin API's operations by name (`POST /_admin/<action>`; docs/sim.md lists them): one small
function each, looked up by `admin_action`, which the HTTP routes and tests share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim import scenario as scen
from sim.models import SimError, iso
from sim.nightly_scenario import NightlyRegressionStory
from sim.world import World

AdminAction = Callable[[World, dict[str, Any]], Any]
_ACTIONS: dict[str, AdminAction] = {}


def _action(name: str) -> Callable[[AdminAction], AdminAction]:
    def register(fn: AdminAction) -> AdminAction:
        _ACTIONS[name] = fn
        return fn

    return register


def admin_action(world: World, action: str, body: dict[str, Any]) -> Any:
    """Every admin operation by name; the HTTP admin routes and tests share this."""
    fn = _ACTIONS.get(action)
    if fn is not None:
        return fn(world, body)
    if action.startswith("scenario/") and action.endswith("/load"):
        return scen.load(world, action[len("scenario/") : -len("/load")], variant=body.get("variant"))
    raise SimError(404, f"unknown admin action {action!r}")


def _locked_admin(world: World, action: str, body: dict[str, Any]) -> Any:
    with world.lock:
        return admin_action(world, action, body)


def _delivery_view(d: Any, full: bool = False) -> dict[str, Any]:
    v = {
        "id": d.id,
        "guid": d.guid,
        "event": d.event,
        "action": d.action,
        "status": d.status,
        "attempts": d.attempts,
        "response_status": d.response_status,
        "redelivery": d.redelivery,
        "duplicate_of": d.duplicate_of,
        "created_at": iso(d.created_at),
    }
    if full:
        v["payload"] = d.payload
    return v


@_action("users")
def _users(world: World, b: dict[str, Any]) -> Any:
    u = world.add_user(b["login"], type=b.get("type", "User"), name=b.get("name"), email=b.get("email"))
    if b.get("token"):
        world.add_token(b["token"], login=u.login)
    for org in b.get("orgs", []):
        world.add_org_member(org, u.login)
    return {"login": u.login, "id": u.id, "type": u.type}


@_action("tokens")
def _tokens(world: World, b: dict[str, Any]) -> Any:
    world.add_token(b["token"], login=b.get("login"), installation_id=b.get("installation_id"))
    return {"token": b["token"]}


@_action("org-members")
def _org_members(world: World, b: dict[str, Any]) -> Any:
    world.add_org_member(b["org"], b["login"], team=b.get("team"), role=b.get("role", "member"))
    return {"ok": True}


@_action("repos")
def _repos(world: World, b: dict[str, Any]) -> Any:
    r = world.add_repo(
        b["full_name"],
        default_branch=b.get("default_branch", "main"),
        private=bool(b.get("private", False)),
        description=b.get("description"),
    )
    if b.get("files"):
        world.commit_files(
            r.full_name,
            r.default_branch,
            b["files"],
            b.get("message", "Initial commit"),
            author=b.get("author", r.owner),
        )
    return {"full_name": r.full_name, "id": r.id}


@_action("custom-roles")
def _custom_roles(world: World, b: dict[str, Any]) -> Any:
    world.add_custom_role(b["name"], b["base_role"])
    return {"name": b["name"], "base_role": b["base_role"]}


@_action("delete-repo")
def _delete_repo(world: World, b: dict[str, Any]) -> Any:
    world.delete_repo(b["repo"])
    return {"ok": True}


@_action("installations")
def _installations(world: World, b: dict[str, Any]) -> Any:
    inst = world.add_installation(
        int(b["app_id"]), b["account"], b.get("repos", []), installation_id=b.get("installation_id")
    )
    return {"installation_id": inst.id}


@_action("permissions")
def _permissions(world: World, b: dict[str, Any]) -> Any:
    world.set_permission(b["repo"], b["login"], b["permission"])
    return {"ok": True}


@_action("regressions")
def _regressions(world: World, b: dict[str, Any]) -> Any:
    reg = world.inject_regression(
        b["repo"],
        world.resolve(world.repo(b["repo"]), b["commit"]),
        float(b.get("factor", 0.05)),
        fixed_by=b.get("fixed_by"),
        metric=str(b.get("metric", "tpot")),
    )
    return {"index": world.regressions.index(reg), **reg.__dict__}


@_action("fix-regression")
def _fix_regression(world: World, b: dict[str, Any]) -> Any:
    fixed = world.fix_regression(
        world.regressions[int(b.get("index", 0))],
        world.resolve(
            world.repo(b.get("repo") or world.regressions[int(b.get("index", 0))].repo), b["fixed_by"]
        ),
    )
    return fixed.__dict__


def _commit(world: World, b: dict[str, Any], message: str) -> Any:
    sha = world.commit_files(
        b["repo"],
        b.get("branch", "main"),
        b["files"],
        b.get("message", message),
        author=b.get("author", "sim"),
    )
    return {"sha": sha}


@_action("commits")
def _commits(world: World, b: dict[str, Any]) -> Any:
    return _commit(world, b, "Update")


@_action("branches")
def _branches(world: World, b: dict[str, Any]) -> Any:
    repo = world.repo(b["repo"])
    sha = b.get("sha") or world.resolve(repo, b.get("from"))
    world.set_ref(b["repo"], f"refs/heads/{b['branch']}", sha, force=True, pusher=b.get("author", "sim"))
    return {"ref": f"refs/heads/{b['branch']}", "sha": sha}


@_action("pulls")
def _pulls(world: World, b: dict[str, Any]) -> Any:
    pr = world.open_pull(
        b["repo"],
        b["head"],
        b.get("base", "main"),
        b["title"],
        b.get("body", ""),
        user=b.get("user"),
        number=b.get("number"),
        head_repo=b.get("head_repo"),
    )
    return {"number": pr.number}


@_action("merge")
def _merge(world: World, b: dict[str, Any]) -> Any:
    return {"sha": world.merge_pull(b["repo"], int(b["number"]), merger=b.get("user"))}


@_action("close")
def _close(world: World, b: dict[str, Any]) -> Any:
    world.close_pull(b["repo"], int(b["number"]), user=b.get("user"))
    return {"ok": True}


@_action("delete-issue")
def _delete_issue(world: World, b: dict[str, Any]) -> Any:
    world.delete_issue(b["repo"], int(b["number"]))
    return {"ok": True}


@_action("comments")
def _comments(world: World, b: dict[str, Any]) -> Any:
    c = world.add_comment(b["repo"], int(b["number"]), b["user"], b["body"])
    return {"id": c.id}


@_action("edit-comment")
def _edit_comment(world: World, b: dict[str, Any]) -> Any:
    world.edit_comment(b["repo"], int(b["id"]), b["body"], user=b.get("user"))
    return {"ok": True}


@_action("tags")
def _tags(world: World, b: dict[str, Any]) -> Any:
    t = world.push_tag(b["image"], b["tag"])
    return {"tag": t.name, "digest": t.digest}


@_action("delete-tag")
def _delete_tag(world: World, b: dict[str, Any]) -> Any:
    world.delete_tag(b["image"], b["tag"])
    return {"ok": True}


@_action("retention")
def _retention(world: World, b: dict[str, Any]) -> Any:
    world.set_retention(b["image"], b.get("keep_nightlies"))
    return {"ok": True}


@_action("variable")
def _variable(world: World, b: dict[str, Any]) -> Any:
    world.set_variable(b["repo"], b["name"], str(b["value"]))
    return world.variables(b["repo"])


@_action("runner-pool")
def _runner_pool(world: World, b: dict[str, Any]) -> Any:
    """``count`` runners of hardware ``label`` in the multi-node pool ``cluster`` (cluster:<name>)."""
    world.set_runners(b["label"], int(b["count"]))
    for r in world.runners[b["label"]]:
        if b["cluster"] not in r.extra_labels:
            r.extra_labels.append(b["cluster"])
    return {lbl: len(rs) for lbl, rs in world.runners.items()}


@_action("runners")
def _runners(world: World, b: dict[str, Any]) -> Any:
    world.set_runners(b["label"], int(b["count"]))
    return {lbl: len(rs) for lbl, rs in world.runners.items()}


@_action("faults")
def _faults(world: World, b: dict[str, Any]) -> Any:
    f = world.faults
    if "fail_next" in b:
        f.fail_next.setdefault(b.get("operation", "*"), []).extend(
            [int(b.get("status", 502))] * int(b["fail_next"])
        )
    for k in ("retry_after", "runner_lost_next", "benchmark_fail_next"):
        if k in b:
            setattr(f, k, int(b[k]))
    for k in ("retry_after_header", "forbid_permission_check"):
        if k in b:
            setattr(f, k, bool(b[k]))
    for k in ("ref_lag_s", "mergeable_delay_s"):
        if k in b:
            setattr(f, k, float(b[k]))
    if "queue_delay_s" in b:
        f.queue_delay_s = float(b["queue_delay_s"])
    if "latency_ms" in b:
        f.latency_ms[b.get("operation", "*")] = int(b["latency_ms"])
    if "dispatch_ignore_run_details" in b:
        f.dispatch_ignore_run_details = bool(b["dispatch_ignore_run_details"])
    if b.get("clear"):
        world.faults = type(f)()
    return {"ok": True}


@_action("webhook")
def _webhook(world: World, b: dict[str, Any]) -> Any:
    if "url" in b:
        world.settings.webhook_url = b["url"]
    if "secret" in b:
        world.settings.webhook_secret = b["secret"]
    if "drop_next" in b:
        world.drop_next_deliveries = int(b["drop_next"])
    if "duplicate" in b:
        world.duplicate_deliveries = bool(b["duplicate"])
    return {
        "url": world.settings.webhook_url,
        "drop_next": world.drop_next_deliveries,
        "duplicate": world.duplicate_deliveries,
    }


@_action("redeliver")
def _redeliver(world: World, b: dict[str, Any]) -> Any:
    return _delivery_view(world.redeliver(b["guid"]))


@_action("time-scale")
def _time_scale(world: World, b: dict[str, Any]) -> Any:
    world.settings.time_scale = float(b["time_scale"])
    return {"time_scale": world.settings.time_scale}


@_action("oauth")
def _oauth(world: World, b: dict[str, Any]) -> Any:
    if "user" in b:
        world.oauth_default_user = b["user"]
    if b.get("client_id"):
        world.oauth_clients[b["client_id"]] = b.get("client_secret", "")
    return {"user": world.oauth_default_user}


@_action("apps")
def _apps(world: World, b: dict[str, Any]) -> Any:
    app = world.add_app(int(b["app_id"]), b["slug"], b["public_key_pem"], b.get("owner", "sim"))
    inst = world.add_installation(
        app.id,
        b.get("account", b.get("owner", "sim")),
        b.get("repos", []),
        installation_id=b.get("installation_id"),
    )
    return {"app_id": app.id, "installation_id": inst.id}


@_action("files")
def _files(world: World, b: dict[str, Any]) -> Any:
    """Load real files (e.g. fixture configs) into a repo in one commit."""
    return _commit(world, b, "Add files")


@_action("nightly/load")
def _nightly_load(world: World, b: dict[str, Any]) -> Any:
    story = NightlyRegressionStory(world, registry_url=b.get("registry_url"))
    status = story.load()
    world.nightly_story = story
    return status


@_action("nightly/step")
def _nightly_step(world: World, b: dict[str, Any]) -> Any:
    if world.nightly_story is None:
        raise SimError(409, "load the nightly story first (POST /_admin/nightly/load)")
    return world.nightly_story.step()


@_action("scenario/step")
def _scenario_step(world: World, b: dict[str, Any]) -> Any:
    return scen.driver(world).step()
