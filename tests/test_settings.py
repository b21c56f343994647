"""Settings: embedded defaults, parsing with clear errors, production refusals, no secrets in logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.settings import Settings, SettingsError


def test_embedded_defaults_live_under_the_data_dir(settings_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path)
    assert s.database_url == f"sqlite:///{(tmp_path / 'sweepbot.sqlite3').resolve()}"
    assert s.broker_url.startswith("sqla+sqlite:///") and s.is_embedded
    assert s.github_api_url == "https://api.github.com"


def test_lists_and_maps_from_the_environment(settings_env: pytest.MonkeyPatch) -> None:
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", "old , new")
    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=9, h100=4")
    settings_env.setenv("SWEEPBOT_REGISTRY_URLS", "docker.io=http://127.0.0.1:9/hub")
    s = Settings()
    assert s.secret_values == [b"old", b"new"]
    assert s.runner_capacity == {"mi355x": 9, "h100": 4}
    assert s.registry_urls == {"docker.io": "http://127.0.0.1:9/hub"}


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("SWEEPBOT_RUNNER_CAPACITY", "mi355x:9", "LABEL=COUNT"),
        ("SWEEPBOT_REGISTRY_URLS", "docker.io", "HOST=URL"),
        ("SWEEPBOT_RUNNER_OVERCOMMIT", "-1", "is not auto or a whole number of jobs"),
        ("SWEEPBOT_RUNNER_OVERCOMMIT", "lots", "SWEEPBOT_RUNNER_OVERCOMMIT 'lots' is not auto"),
        ("SWEEPBOT_RUNNER_OVERCOMMIT", "2.5", "e.g. auto, 0 or 5"),
    ],
)
def test_malformed_values_say_how_to_fix_them(
    settings_env: pytest.MonkeyPatch, name: str, value: str, fragment: str
) -> None:
    settings_env.setenv(name, value)
    with pytest.raises(ValueError, match=fragment):
        Settings()


@pytest.mark.parametrize(
    ("value", "parsed"), [(None, "auto"), ("auto", "auto"), (" AUTO ", "auto"), ("0", 0), ("5", 5)]
)
def test_runner_overcommit_is_auto_by_default_or_a_whole_number(
    settings_env: pytest.MonkeyPatch, value: str | None, parsed: int | str
) -> None:
    if value is not None:
        settings_env.setenv("SWEEPBOT_RUNNER_OVERCOMMIT", value)
    assert Settings().runner_overcommit == parsed


def test_production_refuses_to_start_without_a_webhook_secret(settings_env: pytest.MonkeyPatch) -> None:
    settings_env.setenv("SWEEPBOT_ENV", "production")
    settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "t")
    with pytest.raises(SettingsError, match="SWEEPBOT_WEBHOOK_SECRETS"):
        Settings().check_production()
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", "s3cret")
    Settings().check_production()


def test_production_api_process_exits_with_the_reason(settings_env: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    settings_env.setenv("SWEEPBOT_ENV", "production")
    from app.settings import reset_settings_cache

    reset_settings_cache()
    result = CliRunner().invoke(cli, ["api", "--port", "1"])
    assert result.exit_code == 2
    assert "SWEEPBOT_WEBHOOK_SECRETS" in result.output


def test_logs_never_carry_secrets_or_signatures(
    settings_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], sqlite_url: str, fixtures_dir: Path
) -> None:
    from fastapi.testclient import TestClient

    from app.settings import reset_settings_cache
    from app.web.main import create_app
    from tests.helpers.signing import headers_for

    secret = "very-secret-webhook-key"
    settings_env.setenv("SWEEPBOT_DATABASE_URL", sqlite_url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", secret)
    settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "ghp_supersecrettoken")
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    reset_settings_cache()
    body = (fixtures_dir / "github/webhooks/push/payload.json").read_bytes()
    with TestClient(create_app()) as client:
        good = headers_for("push", body, secret, "log-1")
        bad = headers_for("push", body, "wrong", "log-2")
        assert client.post("/webhooks/github", content=body, headers=good).status_code == 202
        assert client.post("/webhooks/github", content=body, headers=bad).status_code == 401
    import structlog

    structlog.get_logger("t").info(
        "probe", token="ghp_supersecrettoken", signature=good["X-Hub-Signature-256"]
    )
    out = capsys.readouterr()
    text = out.out + out.err
    lines = [json.loads(line) for line in out.err.splitlines() if line.startswith("{")]
    assert any(line.get("event") == "delivery_stored" for line in lines)
    assert secret not in text and "ghp_supersecrettoken" not in text
    assert good["X-Hub-Signature-256"].split("=", 1)[1] not in text
    assert bad["X-Hub-Signature-256"].split("=", 1)[1] not in text


def test_production_refuses_an_app_id_without_its_key(settings_env: pytest.MonkeyPatch) -> None:
    settings_env.setenv("SWEEPBOT_ENV", "production")
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", "s3cret")
    settings_env.setenv("SWEEPBOT_GITHUB_APP_ID", "4242")
    with pytest.raises(SettingsError, match="PRIVATE_KEY"):
        Settings().check_production()
