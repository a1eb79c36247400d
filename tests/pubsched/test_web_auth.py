"""The admin's guards on their own: the argon2 password, the signed sessions, the login
throttle and the cross-origin rule (the app-level behaviour is test_web.py's)."""

from __future__ import annotations

from argon2 import PasswordHasher

from pubsched.web.auth import AdminPassword, LoginThrottle, Sessions, cross_origin_refusal

FAST = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
EVIL = "https://evil.example"


def test_the_password_is_kept_only_as_an_argon2_hash() -> None:
    password = AdminPassword("s3cret", FAST)
    assert password.configured and password.hash is not None
    assert password.hash.startswith("$argon2id$") and "s3cret" not in password.hash
    assert password.check("s3cret") and not password.check("S3cret")
    assert "s3cret" not in repr(vars(password))
    closed = AdminPassword(None, FAST)
    assert not closed.configured and not closed.check("") and not closed.check("s3cret")


def test_sessions_are_signed_fresh_at_each_issue() -> None:
    sessions = Sessions("secret", AdminPassword("pw", FAST), max_age=60)
    one, two = sessions.issue(), sessions.issue()
    assert one != two
    sid = sessions.valid(one)
    assert sid is not None and sessions.valid(two) not in (None, sid)
    assert sessions.valid(one[:-2] + "xx") is None and sessions.valid("") is None
    # a logout is recorded in the database, not here: test_web_logout.py
    # another password (or another secret) signs differently: every session is out
    other = Sessions("secret", AdminPassword("new password", FAST), max_age=60)
    assert other.valid(two) is None
    assert Sessions("other", AdminPassword("pw", FAST)).valid(two) is None


def test_the_throttle_doubles_the_wait_after_a_few_failures() -> None:
    clock = [0.0]
    throttle = LoginThrottle(free=3, base=1.0, cap=8.0, clock=lambda: clock[0])
    for _ in range(3):
        assert throttle.wait("a") == 0.0
        throttle.failed("a")
    waits = []
    for _ in range(5):
        waits.append(throttle.wait("a"))
        clock[0] += waits[-1]
        throttle.failed("a")
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]  # capped
    assert throttle.wait("b") == 0.0  # per client address
    throttle.succeeded("a")
    assert throttle.wait("a") == 0.0


def test_the_cross_origin_rule() -> None:
    assert cross_origin_refusal("GET", {"origin": EVIL}) is None
    assert cross_origin_refusal("POST", {}) is None  # not a browser
    assert cross_origin_refusal("POST", {"sec-fetch-site": "same-origin"}) is None
    assert cross_origin_refusal("POST", {"sec-fetch-site": "none"}) is None  # typed URL
    assert cross_origin_refusal("POST", {"sec-fetch-site": "same-site"}) is not None
    assert cross_origin_refusal("POST", {"sec-fetch-site": "cross-site",
                                         "origin": "http://a", "host": "a"}) is not None
    assert cross_origin_refusal("POST", {"origin": "http://a:8000", "host": "a:8000"}) is None
    assert cross_origin_refusal("POST", {"origin": "http://a:8001", "host": "a:8000"})
    assert cross_origin_refusal("POST", {"origin": "null", "host": "a"}) is not None
    assert cross_origin_refusal("POST", {"origin": "https://pub.example", "host": "internal"},
                                trusted=("https://pub.example",)) is None
    assert cross_origin_refusal("PUT", {"origin": EVIL, "host": "a"}) is not None
    assert cross_origin_refusal("DELETE", {"origin": EVIL, "host": "a"}) is not None


def test_the_throttle_counts_an_attempt_when_it_admits_it() -> None:
    throttle = LoginThrottle(free=2, base=1.0, cap=8.0, clock=lambda: 0.0)
    assert [throttle.admit("a") for _ in range(4)] == [0.0, 0.0, 1.0, 1.0]  # 2 checked
    assert throttle.wait("a") == 1.0 and throttle.admit("b") == 0.0
    throttle.succeeded("a")  # the admitted attempt was right: forgotten
    assert throttle.admit("a") == 0.0
