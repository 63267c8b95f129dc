"""The platform's Alertmanager configuration, judged by Alertmanager's own tool (`amtool check-config`, `amtool config
routes test`): it loads, pages reach the platform's receiver, and the chart's Watchdog heartbeat and InfoInhibitor go
to `'null'`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from blueprints.contracts.platform import PlatformAlerting
from blueprints.requirements.platform_file import ReceiverKind
from components.addons import SILENT_ALERTS, alertmanager_config
from tests.cli_tools import tool, version

#: `url_file` of a webhook receiver needs Alertmanager >= 0.26 (prometheus/alertmanager docs/configuration.md); the
#: platform's kube-prometheus-stack 88.5.3 runs a newer one.
WEBHOOK_URL_FILE = (0, 26)


def _config(kind: ReceiverKind, folder: Path, config: dict | None = None) -> Path:
    if kind is ReceiverKind.WEBHOOK and version("amtool") < WEBHOOK_URL_FILE:
        pytest.skip(f"amtool {'.'.join(map(str, version('amtool')))} predates the webhook receiver's url_file (Alertmanager 0.26)")
    path = folder / f"alertmanager-{kind.value}.yaml"
    alerting = PlatformAlerting(receiver=kind, slack_channel="#ml-serving" if kind is ReceiverKind.SLACK else None)
    path.write_text(yaml.safe_dump(config or alertmanager_config(alerting), sort_keys=False))
    return path


def _amtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([tool("amtool"), *args], capture_output=True, text=True, timeout=60)


def _receiver(path: Path, *labels: str) -> str:
    result = _amtool("config", "routes", "test", f"--config.file={path}", *labels)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("kind", list(ReceiverKind), ids=lambda k: k.value)
def test_the_configuration_loads_and_routes_pages_to_the_receiver_and_the_heartbeats_nowhere(kind, tmp_path):
    path = _config(kind, tmp_path)
    checked = _amtool("check-config", str(path))
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr
    assert "4 inhibit rules" in checked.stdout  # the chart's, given whole
    assert _receiver(path, "alertname=ErrorBudgetFastBurn", "severity=page", "namespace=chat-assistant") == kind.value
    assert _receiver(path, "alertname=QueueBuildingUp", "severity=ticket") == kind.value
    for alert in SILENT_ALERTS:
        assert _receiver(path, f"alertname={alert}") == "null", alert


def test_a_configuration_routing_only_watchdog_away_pages_with_info_inhibitor(tmp_path):
    config = alertmanager_config(PlatformAlerting(receiver=ReceiverKind.SLACK))
    config["route"]["routes"] = [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}]  # as it was
    path = _config(ReceiverKind.SLACK, tmp_path, config)
    assert _receiver(path, "alertname=InfoInhibitor") == "slack"
    verified = _amtool("config", "routes", "test", f"--config.file={path}", "--verify.receivers=null",
                       "alertname=InfoInhibitor")
    assert verified.returncode != 0


def test_an_invalid_configuration_fails_the_check(tmp_path):
    config = alertmanager_config(PlatformAlerting(receiver=ReceiverKind.SLACK))
    config["route"]["receiver"] = "pager"  # no such receiver
    checked = _amtool("check-config", str(_config(ReceiverKind.SLACK, tmp_path, config)))
    assert checked.returncode != 0 and "pager" in checked.stdout + checked.stderr
