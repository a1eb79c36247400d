"""Watching pubsched with Prometheus (issue 29, item 10): ``deploy/prometheus/
pubsched-alerts.yml`` passes ``promtool check rules`` and, through ``promtool test rules``,
fires when it should: the app down (``up == 0``), scraped nowhere (``absent``), its
database down, the tick stale or never run, and the tick alert still firing when the app
is down (the stale-tick alert the docs gave was silent exactly then). The scrape config
docs/pubsched.md gives passes ``promtool check config``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from support.doc_blocks import fenced_blocks
from support.promtool import promtool_says

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "pubsched-alerts.yml"
PAGE = ROOT / "docs" / "pubsched.md"
UP = 'up{job="pubsched", instance="pub:9108"}'
TICK = 'pubsched_tick_last_success_timestamp_seconds{job="pubsched", instance="pub:9108"}'


def fired(*names: str, at: str = "10m") -> list[dict[str, Any]]:
    """``alert_rule_test`` entries: each of ``names`` evaluated at ``at`` (a name with no
    alert expected gets an empty list: it must not fire)."""
    return [{"eval_time": at, "alertname": name, "exp_alerts": []} for name in names]


def firing(name: str, labels: dict[str, str], at: str = "10m") -> dict[str, Any]:
    """``name`` fires at ``at`` once, with ``labels`` (and its annotations, filled in)."""
    (rule,) = [r for g in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
               for r in g["rules"] if r["alert"] == name]
    annotations = {key: re.sub(r"\{\{ \$labels\.(\w+) \}\}",
                               lambda m: labels[m.group(1)], text)
                   for key, text in rule["annotations"].items()}
    return {"eval_time": at, "alertname": name,
            "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}]}


def run_tests(tmp_path: Path, tests: list[dict[str, Any]]) -> None:
    spec = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": tests}
    path = tmp_path / "alerts_test.yml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    done = promtool_says("test", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_pass_promtool() -> None:
    done = promtool_says("check", "rules", str(RULES))
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    assert "WARNING" not in (done.stdout + done.stderr).upper()


def test_the_app_down_fires_and_so_does_the_tick(tmp_path: Path) -> None:
    """Down: ``up`` is 0 and every pubsched series is gone (nothing was scraped)."""
    down = {"severity": "critical", "job": "pubsched", "instance": "pub:9108"}
    run_tests(tmp_path, [{
        "interval": "1m",
        "input_series": [{"series": UP, "values": "0x15"}],
        "alert_rule_test": [firing("PubschedDown", down),
                            firing("PubschedTickStale", {"severity": "critical"}),
                            *fired("PubschedAbsent", "PubschedDatabaseDown")],
    }])


def test_nothing_scraped_at_all_fires(tmp_path: Path) -> None:
    run_tests(tmp_path, [{
        "interval": "1m",
        "input_series": [{"series": 'up{job="other", instance="x:1"}', "values": "1x15"}],
        "alert_rule_test": [firing("PubschedAbsent", {"severity": "critical",
                                                      "job": "pubsched"})],
    }])


def test_a_healthy_pub_is_quiet_and_a_stale_tick_fires(tmp_path: Path) -> None:
    """Ticking every minute (the timestamp follows the clock): quiet. Stuck since the start
    (0: no tick yet), or the database down: each fires."""
    healthy = [{"series": UP, "values": "1x20"},
               {"series": TICK, "values": "0+60x20"},
               {"series": 'pubsched_database_up{job="pubsched", instance="pub:9108"}',
                "values": "1x20"}]
    stuck = [{"series": UP, "values": "1x20"}, {"series": TICK, "values": "0x20"},
             {"series": 'pubsched_database_up{job="pubsched", instance="pub:9108"}',
              "values": "0x20"}]
    run_tests(tmp_path, [
        {"interval": "1m", "input_series": healthy,
         "alert_rule_test": fired("PubschedDown", "PubschedAbsent", "PubschedTickStale",
                                  "PubschedDatabaseDown", at="15m")},
        {"interval": "1m", "input_series": stuck,
         "alert_rule_test": [
             firing("PubschedTickStale", {"severity": "critical"}, at="15m"),
             firing("PubschedDatabaseDown", {"severity": "critical", "job": "pubsched",
                                             "instance": "pub:9108"}, at="15m")]},
    ])


def test_the_documented_scrape_config_passes_promtool(tmp_path: Path) -> None:
    (block,) = [b.text for b in fenced_blocks(PAGE)
                if b.lang == "yaml" and "scrape_configs" in b.text]
    config = yaml.safe_load(block)
    assert [job["job_name"] for job in config["scrape_configs"]] == ["pubsched"]
    assert config["rule_files"] == ["/etc/prometheus/pubsched-alerts.yml"]
    config["rule_files"] = [str(RULES)]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = promtool_says("check", "config", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
