"""docker-compose.yml works as written: the App key is a secret (never an environment value), the
settings come from an env_file, /data is a named volume, every long-running service has a health
check, the API scales without a fixed host port (a proxy is the one entry point), one beat; and a
production start whose key file is missing fails at once, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

COMPOSE = ROOT / "docker-compose.yml"
BOT_SERVICES = ("migrate", "api", "worker", "beat")
KEY_PATH = "/run/secrets/github_app_key"


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())  # PyYAML resolves the <<: *sweepbot merge keys
    assert isinstance(data, dict)
    return data


def test_the_app_key_is_a_secret_file_and_settings_come_from_an_env_file() -> None:
    data = _compose()
    assert data["secrets"]["github_app_key"]["file"] == "./secrets/github-app.pem"
    for name in BOT_SERVICES:
        service = data["services"][name]
        assert "github_app_key" in service["secrets"], name
        env = service["environment"]
        assert env["SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH"] == KEY_PATH, name
        assert "SWEEPBOT_GITHUB_APP_PRIVATE_KEY" not in env, name  # the PEM never in the environment
        files = [f["path"] if isinstance(f, dict) else f for f in service["env_file"]]
        assert files == [".env"], name
        # Secrets live in .env, never in the file itself.
        assert not {k for k in env if k.endswith(("_SECRETS", "_SECRET", "_TOKEN", "_TOKENS"))}, name


def test_data_dir_is_a_named_volume() -> None:
    data = _compose()
    for name in BOT_SERVICES:
        service = data["services"][name]
        assert service["environment"]["SWEEPBOT_DATA_DIR"] == "/data"
        mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
        assert mounts["/data"] in data["volumes"], name  # named, so it outlives the container


def test_health_checks_and_scaling() -> None:
    services = _compose()["services"]
    for name in ("postgres", "redis", "api", "worker", "beat", "proxy"):
        assert services[name]["healthcheck"]["test"], name
    api = services["api"]
    assert "ports" not in api, "a fixed host port stops `--scale api=2`"
    assert api["expose"] == ["8000"] and "--port" in api["command"]
    assert api["command"][api["command"].index("--port") + 1] == "8000"
    assert "127.0.0.1:8000/healthz" in " ".join(api["healthcheck"]["test"])
    published = {n for n, s in services.items() if s.get("ports")}
    assert published <= {"proxy", "flower"}
    assert "api:8000" in " ".join(services["proxy"]["command"])
    assert all(str(p).startswith("127.0.0.1:") for p in services["flower"]["ports"])
    assert "deploy" not in services["beat"]  # exactly one beat: never replicated


def test_env_example_does_not_override_the_secret_path() -> None:
    example = (ROOT / ".env.example").read_text()
    names = {
        line.split("=", 1)[0] for line in example.splitlines() if "=" in line and not line.startswith("#")
    }
    assert {"SWEEPBOT_WEBHOOK_SECRETS", "SWEEPBOT_SESSION_SECRET", "SWEEPBOT_GITHUB_APP_ID"} <= names
    assert "SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH" not in names


def test_a_production_start_with_a_missing_key_file_fails_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "SWEEPBOT_ENV": "production",
            "SWEEPBOT_DATA_DIR": str(tmp_path / "data"),
            "SWEEPBOT_WEBHOOK_SECRETS": "s",
            "SWEEPBOT_GITHUB_APP_ID": "1",
            "SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH": str(tmp_path / "missing.pem"),
        }
    )
    for command in (["api", "--no-migrate", "--port", "0"], ["worker"], ["beat"], ["db", "upgrade"]):
        out = subprocess.run(
            [sys.executable, "-m", "app", *command], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2 and "Traceback" not in out.stderr, (command, out.stderr)
        line = out.stderr.strip()
        assert "\n" not in line and "SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH" in line and "missing.pem" in line
    (tmp_path / "missing.pem").write_text("not a key")
    out = subprocess.run(
        [sys.executable, "-m", "app", "worker"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "no PEM private key" in out.stderr
