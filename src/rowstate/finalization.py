"""Finalization claims: keyed by (holder, scope), re-claimable by the same holder,
stealable after their TTL, cleared by any move into a state that is not active.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .base import Op
from .binding import FinalizationClaim, check_scalar
from .compiler import Batch
from .conditions import And, Check, IsNull, Older, Or, Ref, Same, Slot
from .errors import ValidationError
from .results import FinalizationClaimResult, Reason, ReleaseResult

if TYPE_CHECKING:
    from .core import Core

_new = tuple.__new__  # a named tuple without its Python-level __new__ (see rowstate.lanes)


# claim_finalization and release_finalization, and their checks as data.
# Functions of a Core, bound as its methods in rowstate.core (no mixins).


# -- finalization claims -------------------------------------------------------------


def _finalization_values(self: Core, key: object, holder: object, scope: object,
                         ) -> tuple[FinalizationClaim, dict[str, Any]]:
    """The claim's columns and the call's values, checked before any I/O."""
    f = _checked(self, holder, scope)
    _, values = self.values(key)
    values.update(fholder=holder, fscope=scope, fttl=float(f.ttl))
    return f, values


def _checked(self: Core, holder: object, scope: object) -> FinalizationClaim:
    f = self.b.finalization
    if f is None:
        raise ValidationError(f"{self.b.table}: the binding has no finalization claim")
    if not isinstance(holder, str) or not holder:
        raise ValidationError(f"finalization holder must be a non-empty string, "
                              f"got {holder!r}")
    check_scalar(holder, "holder", ValidationError)
    if scope is not None:
        if not isinstance(scope, str):
            raise ValidationError(f"finalization scope must be a string, got {scope!r}")
        check_scalar(scope, "scope", ValidationError)
    return f


def claim_finalization(self: Core, key: object, holder: str, scope: str | None = None, *,
                       returning: Iterable[str] | None = None,
                       ) -> Op[FinalizationClaimResult]:
    """``returning``: the columns the claimed row needs (the claim's token is added).

    The claim's statement is bound from a template and brings the read that explains a
    refusal in the same batch (see :mod:`rowstate.lanes`)."""
    f = _checked(self, holder, scope)
    kv = self.b.key_values(key)
    cols = self._returning(returning, f.token)
    cached = self._plans.get(("fclaim", cols))
    if cached is None:
        c = self.c
        sets = [c.set_value(f.holder, Slot("fholder")), c.set_value(f.scope, Slot("fscope")),
                c.set_now(f.at)]
        if f.token:
            sets.append(c.incremented(f.token))
        plan = c.cas([self._fclaim_check(f)], sets, None, known_from=True, returning=cols)
        write = self._template(plan.main, {"fttl": float(f.ttl)}, ("fholder", "fscope"))
        cached = self._plans[("fclaim", cols)] = (plan, write, self._read_template)
    plan, write, read = cached
    if plan.fast and write is not None and read is not None:
        rows = yield _new(Batch, (((write.sql, write.bind(kv, named=(holder, scope))),),
                                  False, (read.sql, read.bind(kv))))
        if rows[0]:
            new = dict(zip(plan.columns, rows[0][0], strict=True))
            token = new.get(f.token) if f.token else None
            return _new(FinalizationClaimResult, (True, None, holder, scope, token, new))
        out = self._outcome_of_read(rows[1])
    else:
        _, values = self.values(kv)
        values.update(fholder=holder, fscope=scope, fttl=float(f.ttl))
        out = yield from self._cas(plan, values)
    if out.new is not None:
        token = out.new.get(f.token) if f.token else None
        return FinalizationClaimResult(True, None, holder, scope, token, out.new)
    if out.cur is None:
        return FinalizationClaimResult(False, Reason.RECORD_NOT_FOUND)
    return FinalizationClaimResult(False, Reason.HELD_BY_OTHER, out.cur.get(f.holder),
                                   out.cur.get(f.scope), None, out.cur)


def release_finalization(self: Core, key: object, holder: str,
                         scope: str | None = None) -> Op[ReleaseResult]:
    """Owner-checked on (holder, scope) and idempotent: nothing held, nothing done."""
    f = self.b.finalization
    if f is None:
        raise ValidationError(f"{self.b.table}: the binding has no finalization claim")
    if not isinstance(holder, str) or (scope is not None and not isinstance(scope, str)):
        raise ValidationError("finalization holder and scope must be strings")
    kv = self.b.key_values(key)
    cached = self._plans.get(("frelease",))
    if cached is None:
        c = self.c
        stmt = c.conditional_update(
            [self._frelease_check(f)],
            [c.set_null(f.holder), c.set_null(f.scope), c.set_null(f.at)],
        )
        template = self._template(stmt, {}, ("fholder", "fscope"))
        cached = self._plans[("frelease",)] = (stmt, template)
    stmt, template = cached
    if template is not None:
        rows = yield _new(Batch, (((template.sql, template.bind(kv, named=(holder, scope))),),
                                  False, None))
    else:
        _, values = self.values(kv)
        values.update(fholder=holder, fscope=scope)
        rows = yield Batch((stmt.bind(self.d, values),))
    return ReleaseResult(bool(rows[0]))


def _fclaim_check(f: FinalizationClaim) -> Check:
    """Free, already ours (same holder and scope: a redelivery), or stale."""
    h, s, at = Ref(f.holder), Ref(f.scope), Ref(f.at)
    node = Or((IsNull(h), And((Same(h, Slot("fholder")), Same(s, Slot("fscope")))),
               Older(at, Slot("fttl"))))
    return Check(node, Reason.HELD_BY_OTHER, Reason.HELD_BY_OTHER)


def _frelease_check(f: FinalizationClaim) -> Check:
    node = And((Same(Ref(f.holder), Slot("fholder")), Same(Ref(f.scope), Slot("fscope"))))
    return Check(node, Reason.HELD_BY_OTHER, Reason.HELD_BY_OTHER)


def finalization_checks(self: Core, key: object, holder: str, scope: str | None = None,
                        ) -> tuple[Check, Check, dict[str, Any]]:
    """(the claim's check, the release's check, their values)."""
    f, values = self._finalization_values(key, holder, scope)
    return self._fclaim_check(f), self._frelease_check(f), values

