"""The pure checks behind `up`/`demo` refusals, the demo's story text, and the launcher's lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.preflight import (
    Holder,
    PortUse,
    already_running_message,
    child_failure_line,
    duplicate_ports,
    is_address_in_use,
    lock_text,
    parse_lock,
    port_taken_message,
    sim_webhook_secrets,
)
from devstack.storytext import Collapser, Event, IdleNarrator, fit, render, sweep_activity

UVICORN_BIND_ERROR = (
    "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): "
    "address already in use"
)


def test_port_message_names_the_port_and_the_flag() -> None:
    line = port_taken_message(PortUse("127.0.0.1", 8001, "the simulated GitHub", "--sim-port"))
    assert "8001" in line and "--sim-port" in line and "\n" not in line


def test_one_port_for_two_roles_is_refused_before_binding() -> None:
    uses = [PortUse("h", 9000, "the API", "--port"), PortUse("h", 9000, "the sim", "--sim-port")]
    assert (
        duplicate_ports(uses) == "--port and --sim-port are both 9000: the API and the sim need a port each"
    )
    assert duplicate_ports(uses[:1]) is None


def test_lock_file_round_trip_and_a_half_written_one() -> None:
    assert parse_lock(lock_text(42, "http://127.0.0.1:8000/")) == Holder(42, "http://127.0.0.1:8000/")
    assert parse_lock("") == Holder(None, None)
    assert parse_lock("[1]") == Holder(None, None)
    line = already_running_message(Holder(42, "http://127.0.0.1:8000/"), "/d")
    assert line == (
        "sweepbot is already running on the data dir /d (pid 42), dashboard at http://127.0.0.1:8000/; "
        "stop it or use --data-dir for a second one"
    )
    assert "still starting" in already_running_message(Holder(None, None), "/d")


def test_the_childs_failure_line_prefers_uvicorns_bind_error() -> None:
    log = f'{{"event": "startup"}}\n{UVICORN_BIND_ERROR}\nINFO:     Waiting for application shutdown.\n'
    line = child_failure_line(log)
    assert line == UVICORN_BIND_ERROR and is_address_in_use(line)
    assert child_failure_line("ok\nValueError: bad\nbye\n") == "ValueError: bad"
    assert child_failure_line("") is None


def test_the_operators_webhook_secrets_are_kept_and_the_sims_added() -> None:
    assert sim_webhook_secrets(["mine", "old"], "sim") == ["mine", "old", "sim"]
    assert sim_webhook_secrets([], "sim") == ["sim"]
    assert sim_webhook_secrets(["sim"], "sim") == ["sim"]


def test_the_sim_environment_keeps_configured_secrets(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from devstack.launcher import sim_environment
    from sim.world import SimSettings

    world = SimpleNamespace(settings=SimSettings(), oauth_clients={}, hook_id=424242)
    sim = SimpleNamespace(world=world, github_api_url="http://s/api/v3", url="http://s")
    env = sim_environment(sim, tmp_path, "http://a", ["operator-secret"])
    secrets = env["SWEEPBOT_WEBHOOK_SECRETS"].split(",")
    assert secrets[0] == "operator-secret" and world.settings.webhook_secret in secrets and len(secrets) == 2
    # GitHub (and the simulator) never retry a failed delivery: the bot asks the sim's hook for them
    assert env["SWEEPBOT_REDELIVERY_HOOKS"] == "SemiAnalysisAI/InferenceX:424242"


def test_instance_lock_refuses_a_second_holder_with_the_first_ones_dashboard(tmp_path: Path) -> None:
    from devstack.launcher import StartRefused, instance_lock

    with (
        instance_lock(tmp_path, "up", "http://127.0.0.1:8000/"),
        pytest.raises(
            StartRefused, match=r"dashboard at http://127\.0\.0\.1:8000/; stop it or use --data-dir"
        ),
        instance_lock(tmp_path, "up", "http://127.0.0.1:9000/"),
    ):
        pass
    with instance_lock(tmp_path, "up", "http://127.0.0.1:9000/"):  # released when the first one ends
        pass


def test_lines_fit_the_terminal() -> None:
    assert fit("abcdef", 4) == "abc…" and len(fit("x" * 300, 80)) == 80
    assert fit("short", 80) == "short" and fit("anything", 0) == "anything"


def test_repeated_events_collapse_with_a_count() -> None:
    c = Collapser(window=2.0)
    out: list[str] = []
    for i in range(12):
        out += c.feed(Event(1.0 + i * 0.1, "github -> bot", "push", "o/r"))
        out += c.feed(Event(1.0 + i * 0.1, "github -> bot", "workflow_job.queued", "o/r"))
    assert out == [] and c.tick(2.0) == []  # still inside the window
    out += c.feed(Event(20.0, "bot", "github.issues/create-comment", "o/r#1"))
    out += c.flush()
    assert out == [
        "[   1.0s] github -> bot push ×12 o/r",
        "[   1.0s] github -> bot workflow_job.queued ×12 o/r",
        "[  20.0s] bot           github.issues/create-comment o/r#1",
    ]
    assert render(Event(2.0, "bot", "x", "t", "refused")).endswith("[refused]")


def test_the_narrator_speaks_only_after_a_quiet_spell_and_does_not_repeat_itself() -> None:
    n = IdleNarrator(quiet=4, every=10)
    n.saw_output(0.0)
    assert not n.due(2.0, "collecting results")
    assert n.due(5.0, "collecting results")
    assert not n.due(7.0, "collecting results")
    assert n.due(8.0, "collecting results: 3/10")  # changed: said at once
    assert n.due(19.0, "collecting results: 3/10")  # unchanged but long enough ago


def test_sweep_activity_says_what_the_bot_is_doing() -> None:
    assert "planning" in sweep_activity([], False, 1)
    line = sweep_activity(["succeeded"] * 3 + ["running"] * 6 + ["queued"], False, 1)
    assert line == (
        "collecting results: 3/10 jobs finished (6 on the runners or having their results collected; "
        "1 queued for a free runner)"
    )
    assert "report debounce (5s)" in sweep_activity(["succeeded"] * 10, False, 5)
    assert "nothing more changes" in sweep_activity(["succeeded"] * 10, True, 5)
