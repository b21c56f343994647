"""Contract test: every response the sim sends for a subset operation validates against the spec."""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jsonschema import Draft4Validator

from sim import github_api
from sim.scenario import SeedScenario
from sim.server import SimServer
from sim.world import SimSettings
from tests.conftest import FIXTURES
from tests.helpers.wait import wait_for
from tests.sim.conftest import FAST, TEST_CONFIG

SPEC_PATH = FIXTURES / "github" / "openapi-subset.json"


def _nullable(node: Any) -> Any:
    """OpenAPI 3.0 -> JSON Schema: `nullable: true` becomes an explicit null alternative."""
    if isinstance(node, list):
        return [_nullable(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable(v) for k, v in node.items() if k not in ("example", "examples", "nullable")}
    # GitHub's description uses oneOf for alternatives that are not mutually exclusive (e.g. two
    # error shapes whose fields are all optional): no body could match exactly one, so read it as anyOf
    if "oneOf" in out:
        out["anyOf"] = out.pop("oneOf")
    if node.get("nullable"):
        if "type" in out and "enum" not in out:
            out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    raw = json.loads(SPEC_PATH.read_text())
    return {"paths": raw["paths"], "components": _nullable(copy.deepcopy(raw["components"]))}


def _operation(spec: dict[str, Any], op_id: str) -> dict[str, Any]:
    for ops in spec["paths"].values():
        for op in ops.values():
            if isinstance(op, dict) and op.get("operationId") == op_id:
                return op
    raise KeyError(op_id)


def check(spec: dict[str, Any], op_id: str, resp: httpx.Response) -> None:
    op = _operation(spec, op_id)
    responses = op["responses"]
    assert str(resp.status_code) in responses, f"{op_id}: status {resp.status_code} not documented"
    r = responses[str(resp.status_code)]
    if "$ref" in r:
        r = spec["components"]["responses"][r["$ref"].rsplit("/", 1)[1]]
    content = r.get("content", {})
    schema = (content.get("application/json") or {}).get("schema")
    if schema is None:
        assert not resp.content or resp.status_code in (302,), f"{op_id}: body where none is documented"
        return
    root = {"components": spec["components"], "allOf": [_nullable(schema)]}
    errors = sorted(Draft4Validator(root).iter_errors(resp.json()), key=str)
    assert not errors, f"{op_id} {resp.status_code}: {[e.message[:200] for e in errors[:5]]}"


def test_every_subset_operation_matches_its_schema(spec: dict[str, Any]) -> None:
    subset_ops = {
        op["operationId"]
        for ops in spec["paths"].values()
        for op in ops.values()
        if isinstance(op, dict) and "operationId" in op
    }
    checked: set[str] = set()
    with SimServer(settings=SimSettings(time_scale=FAST)) as sim:
        sc = SeedScenario(sim.world)
        sc.load()
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub = (
            key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )
        sim.world.add_app(77, "sweepbot", pub, owner="SemiAnalysisAI")
        inst = sim.world.add_installation(77, "SemiAnalysisAI", ["SemiAnalysisAI/InferenceX"])
        sim.world.push_tag("semianalysisai/sweep-runner", "v1")
        api = sim.github_api_url
        c = httpx.Client(base_url=api, headers={"Authorization": "token sim-token"})
        B = "/repos/SemiAnalysisAI/InferenceX"
        V = "/repos/vllm-project/vllm"

        def call(method: str, path: str, expect: int | None = None, **kw: Any) -> httpx.Response:
            resp = c.request(method, path, **kw)
            found = github_api.match(method, path.split("?")[0])
            assert found is not None, path
            op_id = found[0]
            if expect is not None:
                assert resp.status_code == expect, (path, resp.status_code, resp.text[:300])
            if op_id in subset_ops:
                check(spec, op_id, resp)
                checked.add(op_id)
            return resp

        import time as _t

        import jwt

        now = int(_t.time())
        token = jwt.encode(
            {"iat": now - 30, "exp": now + 300, "iss": "77"},
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
            algorithm="RS256",
        )
        app_h = {"Authorization": f"Bearer {token}"}
        call("GET", f"{B}/installation", 200, headers=app_h)
        call("POST", f"/app/installations/{inst.id}/access_tokens", 201, headers=app_h)
        assert [i["id"] for i in call("GET", "/app/installations", 200, headers=app_h).json()] == [inst.id]
        call("GET", "/rate_limit", 200)
        call("GET", f"{B}/contents/.github/configs/amd-master.yaml", 200)
        call("GET", f"{B}/contents/.github/configs", 200)
        call("GET", f"{B}/contents/nope.yaml", 404)
        main = call("GET", f"{B}/git/ref/heads/main", 200).json()["object"]["sha"]
        call("GET", f"{B}/git/ref/heads/missing", 404)
        call("GET", f"{B}/git/matching-refs/heads/", 200)
        blob = call("POST", f"{B}/git/blobs", 201, json={"content": "hello\n", "encoding": "utf-8"}).json()[
            "sha"
        ]
        call("GET", f"{B}/git/blobs/{blob}", 200)
        commit = call("GET", f"{B}/git/commits/{main}", 200).json()
        tree = call(
            "POST",
            f"{B}/git/trees",
            201,
            json={
                "base_tree": commit["tree"]["sha"],
                "tree": [{"path": "notes/hello.txt", "mode": "100644", "type": "blob", "sha": blob}],
            },
        ).json()["sha"]
        call("GET", f"{B}/git/trees/{tree}?recursive=1", 200)
        new = call(
            "POST", f"{B}/git/commits", 201, json={"message": "m", "tree": tree, "parents": [main]}
        ).json()
        call("POST", f"{B}/git/refs", 201, json={"ref": "refs/heads/sweepbot/x", "sha": main})
        call("POST", f"{B}/git/refs", 422, json={"ref": "refs/heads/sweepbot/x", "sha": main})
        call("PATCH", f"{B}/git/refs/heads/sweepbot/x", 200, json={"sha": new["sha"]})
        call("PATCH", f"{B}/git/refs/heads/sweepbot/x", 422, json={"sha": main})
        call("DELETE", f"{B}/git/refs/heads/sweepbot/x", 204)
        put = {"message": "add", "content": base64.b64encode(b"a\n").decode(), "branch": "main"}
        created = call("PUT", f"{B}/contents/docs/a.txt", 201, json=put).json()
        call(
            "PUT",
            f"{B}/contents/docs/a.txt",
            200,
            json={**put, "sha": created["content"]["sha"], "content": base64.b64encode(b"b\n").decode()},
        )
        call("PUT", f"{B}/contents/docs/a.txt", 409, json=put)
        call("GET", f"{B}/compare/main...minimaxm3-fp4-mi355x-vllm-int4-qr", 200)
        call("GET", f"{B}/compare/main...nope", 404)
        call("GET", f"{B}/collaborators/bob-maintainer/permission", 200)
        call("GET", f"{B}/collaborators/nobody/permission", 404)
        call("GET", f"{B}/pulls?state=all", 200)
        call("GET", f"{B}/pulls/2104", 200)
        call("GET", f"{B}/pulls/2104/files", 200)
        call("PATCH", f"{B}/pulls/2104", 200, json={"body": "edited by the contract test"})
        call("GET", B, 200)
        call("GET", f"{B}/pulls/9999", 404)
        call("GET", f"{B}/pulls/2104/merge", 404)
        call("POST", f"{B}/git/refs", 201, json={"ref": "refs/heads/bump", "sha": new["sha"]})
        pr = call(
            "POST", f"{B}/pulls", 201, json={"head": "bump", "base": "main", "title": "t", "body": "b"}
        ).json()
        call("POST", f"{B}/pulls", 422, json={"head": "bump", "base": "main", "title": "t"})
        merged = call("PUT", f"{B}/pulls/{pr['number']}/merge", 200, json={}).json()["sha"]
        assert [p["number"] for p in call("GET", f"{B}/commits/{merged}/pulls", 200).json()] == [pr["number"]]
        assert call("GET", f"{B}/commits/{main}/pulls", 200).json() == []  # on main before any PR
        call("PUT", f"{B}/pulls/{pr['number']}/merge", 405, json={})
        call("GET", f"{B}/pulls/{pr['number']}/merge", 204)
        com = call("POST", f"{B}/issues/2104/comments", 201, json={"body": "hi"}).json()
        call("POST", f"{B}/issues/2104/comments", 422, json={})
        call("GET", f"{B}/issues/2104/comments", 200)
        call("GET", f"{B}/issues/comments/{com['id']}", 200)
        call("GET", f"{B}/issues/comments/1", 404)
        call("PATCH", f"{B}/issues/comments/{com['id']}", 200, json={"body": "edited"})
        call("POST", f"{B}/issues/comments/{com['id']}/reactions", 201, json={"content": "rocket"})
        call("POST", f"{B}/issues/comments/{com['id']}/reactions", 200, json={"content": "rocket"})
        call("POST", f"{B}/issues/comments/{com['id']}/reactions", 422, json={"content": "nope"})
        call("GET", f"{B}/issues/comments/{com['id']}/reactions", 200)
        call("GET", f"{B}/issues?state=all", 200)
        call("POST", f"{B}/issues/2104/labels", 200, json={"labels": ["sweep:contract"]})
        call("DELETE", f"{B}/issues/2104/labels/sweep%3Acontract", 200)
        call("DELETE", f"{B}/issues/2104/labels/sweep%3Acontract", 404)
        cmd = f"{TEST_CONFIG} minimaxm3-fp4-mi355x-vllm --conc 4 8"
        d = call(
            "POST",
            f"{B}/actions/workflows/e2e-tests.yml/dispatches",
            200,
            json={"ref": "main", "inputs": {"generate-cli-command": cmd}, "return_run_details": True},
        ).json()
        call(
            "POST",
            f"{B}/actions/workflows/e2e-tests.yml/dispatches",
            204,
            json={"ref": "main", "inputs": {"generate-cli-command": cmd}},
        )
        run_id = d["workflow_run_id"]
        wait_for(lambda: sim.world.runs[run_id].status == "completed", what="run")
        call("POST", f"{B}/actions/runs/{run_id}/cancel", 409)  # finished: no longer cancellable
        sim.world.settings.time_scale = 1.0  # keep the next run in flight until it is cancelled
        held = call(
            "POST",
            f"{B}/actions/workflows/e2e-tests.yml/dispatches",
            200,
            json={"ref": "main", "inputs": {"generate-cli-command": cmd}, "return_run_details": True},
        ).json()["workflow_run_id"]
        call("POST", f"{B}/actions/runs/{held}/cancel", 202)
        sim.world.settings.time_scale = FAST
        call("GET", f"{B}/actions/runs", 200)
        call("GET", f"{B}/actions/workflows/e2e-tests.yml/runs", 200)
        call("GET", f"{B}/actions/runs/{run_id}", 200)
        jobs = call("GET", f"{B}/actions/runs/{run_id}/jobs", 200).json()["jobs"]
        call("GET", f"{B}/check-runs/{jobs[0]['id']}/annotations", 200)  # a job's check run has its id
        arts = call("GET", f"{B}/actions/runs/{run_id}/artifacts", 200).json()["artifacts"]
        call("GET", f"{B}/actions/artifacts", 200)
        call("GET", f"{B}/actions/artifacts/{arts[0]['id']}", 200)
        call("GET", f"{B}/actions/artifacts/{arts[0]['id']}/zip", 302)
        call("GET", f"{V}/compare/main...main", 200)
        call("GET", "/orgs/semianalysisai/packages/container/sweep-runner/versions", 200)
        call("GET", "/users/semianalysisai/packages/container/sweep-runner/versions", 200)
        call("GET", "/orgs/semianalysisai/packages/container/none/versions", 404)
        sim.world.push_tag("sweepbot[bot]/own", "v1")
        call("GET", "/user/packages/container/own/versions", 200)
        # webhook deliveries: no receiver is configured for the sim's hook, so each event of the
        # run above was recorded as a failed attempt (GitHub never retries those itself)
        sim.world.settings.webhook_url = "http://127.0.0.1:9/nobody-listens"
        sim.world.add_comment("SemiAnalysisAI/InferenceX", 2104, "bob-maintainer", "a")
        sim.world.add_comment("SemiAnalysisAI/InferenceX", 2104, "bob-maintainer", "b")
        wait_for(
            lambda: sum(d.status == "failed" for d in sim.world.deliveries) >= 2, what="failed deliveries"
        )
        page = call("GET", "/app/hook/deliveries?per_page=1", 200, headers=app_h)
        assert 'rel="next"' in page.headers["link"] and page.json()[0]["status"] != "OK"
        first = page.json()[0]["id"]
        call("GET", f"/app/hook/deliveries/{first}", 200, headers=app_h)
        call("POST", f"/app/hook/deliveries/{first}/attempts", 202, headers=app_h)
        assert c.get("/app/hook/deliveries").status_code == 401  # needs the App's JWT (undocumented code)
        hook = f"{B}/hooks/{sim.world.hook_id}/deliveries"
        listed = call("GET", f"{hook}?per_page=2", 200).json()
        call("POST", f"{hook}/{listed[0]['id']}/attempts", 202)
        assert c.get(f"{B}/hooks/1/deliveries").status_code == 404  # no such hook
    missing = subset_ops - checked
    assert not missing, f"operations never exercised: {sorted(missing)}"
    assert re.match(r"^[a-z]", next(iter(checked)))
