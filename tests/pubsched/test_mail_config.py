"""Mail settings: read once from a mapping, every bad value a clear error."""

from __future__ import annotations

import dataclasses

import pytest

from pubsched.mail.settings import MailConfigError, MailSettings, load_mail_settings


def test_every_variable_is_read_from_the_mapping_given() -> None:
    settings = load_mail_settings(
        {
            "PUBSCHED_SMTP_HOST": "smtp.example.com",
            "PUBSCHED_SMTP_PORT": "587",
            "PUBSCHED_SMTP_USER": "pub",
            "PUBSCHED_SMTP_PASSWORD": "s3cret",
            "PUBSCHED_SMTP_STARTTLS": "true",
            "PUBSCHED_SMTP_TIMEOUT": "2.5",
            "PUBSCHED_MAIL_FROM": "pub@example.com",
            "PUBSCHED_OPERATOR_EMAIL": "ops@example.com",
            "PUBSCHED_REHEARSAL": "1",
        }
    )
    assert settings == MailSettings(
        smtp_host="smtp.example.com",
        smtp_port=587,
        smtp_user="pub",
        smtp_password="s3cret",
        smtp_tls="starttls",
        smtp_timeout=2.5,
        mail_from="pub@example.com",
        operator_email="ops@example.com",
        rehearsal=True,
    )
    assert settings.sends_over_smtp


def test_unset_and_empty_mean_the_defaults_and_no_host_means_the_log() -> None:
    settings = load_mail_settings({"PUBSCHED_SMTP_HOST": "", "PUBSCHED_REHEARSAL": " "})
    assert settings == MailSettings()
    assert settings.smtp_port == 25
    assert not settings.sends_over_smtp
    assert not settings.rehearsal


def test_the_settings_are_frozen_and_the_password_stays_out_of_repr() -> None:
    settings = load_mail_settings({"PUBSCHED_SMTP_USER": "pub", "PUBSCHED_SMTP_PASSWORD": "s3cret"})
    assert "s3cret" not in repr(settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.smtp_port = 2525  # type: ignore[misc]


@pytest.mark.parametrize("port", ["abc", "25.0", "", "0", "65536", "-1"])
def test_a_port_that_is_not_a_port_is_a_clear_error(port: str) -> None:
    if port == "":
        assert load_mail_settings({"PUBSCHED_SMTP_PORT": port}).smtp_port == 25
        return
    with pytest.raises(MailConfigError, match="PUBSCHED_SMTP_PORT"):
        load_mail_settings({"PUBSCHED_SMTP_PORT": port})


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"PUBSCHED_SMTP_STARTTLS": "maybe"}, "PUBSCHED_SMTP_STARTTLS"),
        ({"PUBSCHED_REHEARSAL": "2"}, "PUBSCHED_REHEARSAL"),
        ({"PUBSCHED_SMTP_TIMEOUT": "soon"}, "PUBSCHED_SMTP_TIMEOUT"),
        ({"PUBSCHED_SMTP_TIMEOUT": "0"}, "PUBSCHED_SMTP_TIMEOUT"),
        ({"PUBSCHED_MAIL_FROM": "not an address"}, "PUBSCHED_MAIL_FROM"),
        ({"PUBSCHED_MAIL_FROM": "Pub <not an address>"}, "PUBSCHED_MAIL_FROM"),
        ({"PUBSCHED_MAIL_FROM": "Crown, The <rota@pub.example>"}, "PUBSCHED_MAIL_FROM"),
        ({"PUBSCHED_MAIL_FROM": "The Crown <rota@pub.example."}, "PUBSCHED_MAIL_FROM"),
        ({"PUBSCHED_OPERATOR_EMAIL": "ops@"}, "PUBSCHED_OPERATOR_EMAIL"),
        ({"PUBSCHED_SMTP_USER": "pub"}, "PUBSCHED_SMTP_PASSWORD"),
        ({"PUBSCHED_REHEARSAL": "1"}, "PUBSCHED_OPERATOR_EMAIL"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(MailConfigError, match=names):
        load_mail_settings(env)


@pytest.mark.parametrize("raw", ["The Crown <rota@pub.example>",
                                 '"The Crown" <rota@pub.example>',
                                 "  The Crown   <rota@pub.example> "])
def test_the_sender_may_carry_a_display_name(raw: str) -> None:
    """Issue 17 item 16: ``Name <address>`` is the sender's name and address (the envelope
    gets the address alone)."""
    settings = load_mail_settings({"PUBSCHED_MAIL_FROM": raw})
    assert (settings.mail_from_name, settings.mail_from) == ("The Crown", "rota@pub.example")
    bare = load_mail_settings({"PUBSCHED_MAIL_FROM": "rota@pub.example"})
    assert (bare.mail_from_name, bare.mail_from) == (None, "rota@pub.example")


def test_os_environ_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PUBSCHED_SMTP_PORT", "2525")
    assert load_mail_settings().smtp_port == 2525


def test_the_pubs_name_and_address_are_read_once_with_the_mail_settings() -> None:
    """Issue #18: PUBSCHED_PUB_NAME (default "The pub") and PUBSCHED_PUB_ADDRESS."""
    assert load_mail_settings({}).pub_name == "The pub"
    assert load_mail_settings({}).pub_address is None
    settings = load_mail_settings({"PUBSCHED_PUB_NAME": " The King's Head ",
                                   "PUBSCHED_PUB_ADDRESS": "1 High Street, Hadley"})
    assert settings.pub_name == "The King's Head"
    assert settings.pub_address == "1 High Street, Hadley"  # commas are fine: not a header


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"PUBSCHED_PUB_NAME": "Crown, The"}, "PUBSCHED_PUB_NAME"),  # would split From:
        ({"PUBSCHED_PUB_NAME": "The <Crown>"}, "PUBSCHED_PUB_NAME"),
        ({"PUBSCHED_PUB_ADDRESS": "1 High St\nLOCATION:elsewhere"}, "one line"),
        ({"PUBSCHED_PUB_ADDRESS": "x" * 201}, "at most 200"),
    ],
)
def test_a_pub_name_or_address_that_cannot_be_used_is_refused_at_start_up(
        env: dict[str, str], says: str) -> None:
    with pytest.raises(MailConfigError, match=says):
        load_mail_settings(env)
