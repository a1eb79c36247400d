"""Finalization claims: keyed by (holder, scope), re-claimable by the same holder,
stealable after their TTL, cleared by any move into a state that is not active (the SETs of
:meth:`rowstate.core.rules.Rules.entry_sets`); a live one blocks entering the states its
binding lists (the ``finalization_free`` check).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..conditions import Check
from ..errors import ValidationError
from ..protocol import Batch, Op
from ..results import FinalizationClaimResult, Reason, ReleaseResult
from ..specs import FinalizationClaim
from ..values import check_scalar
from .cas import Cas
from .context import Context
from .inputs import Inputs
from .rules import Ask, Rules

_new = tuple.__new__  # a named tuple without its Python-level __new__ (see core.lane)


class Finalization:
    """``claim_finalization``, ``release_finalization``, and their checks as data."""

    def __init__(self, context: Context, inputs: Inputs, rules: Rules, cas: Cas) -> None:
        self.context = context
        self.binding = context.binding
        self.inputs = inputs
        self.rules = rules
        self.cas = cas

    def claim_finalization(self, key: object, holder: str, scope: str | None = None, *,
                           returning: Iterable[str] | None = None,
                           ) -> Op[FinalizationClaimResult]:
        """``returning``: the columns the claimed row needs (the claim's token is added).

        The claim's statement is bound from a template and brings the read that explains a
        refusal in the same batch (see :mod:`rowstate.core.lane`)."""
        f = self._checked(holder, scope)
        kv = self.binding.key_values(key)
        cols = self.inputs.returning(returning, f.token)
        plans = self.context.plans
        cached = plans.get(("fclaim", cols))
        if cached is None:
            checks = self.rules.checks("claim_finalization", Ask(), {})
            plan = self.context.compiler.cas(checks, self.rules.finalization_claim_sets(),
                                             None, known_from=True, returning=cols)
            write = self.context.template(plan.main, {"fttl": float(f.ttl)},
                                          ("fholder", "fscope"))
            cached = plans[("fclaim", cols)] = (plan, write, self.context.read_template)
        plan, write, read = cached
        if plan.fast and write is not None and read is not None:
            rows = yield _new(Batch, (((write.sql, write.bind(kv, named=(holder, scope))),),
                                      False, (read.sql, read.bind(kv))))
            if rows[0]:
                new = dict(zip(plan.columns, rows[0][0], strict=True))
                token = new.get(f.token) if f.token else None
                return _new(FinalizationClaimResult, (True, None, holder, scope, token,
                                                      self.context.public(new)))
            out = self.cas.outcome_of_read(rows[1])
        else:
            _, values = self.inputs.values(kv)
            values.update(fholder=holder, fscope=scope, fttl=float(f.ttl))
            out = yield from self.cas.run(plan, values)
        if out.new is not None:
            token = out.new.get(f.token) if f.token else None
            return FinalizationClaimResult(True, None, holder, scope, token,
                                           self.context.public(out.new))
        if out.cur is None:
            return FinalizationClaimResult(False, Reason.RECORD_NOT_FOUND)
        return FinalizationClaimResult(False, Reason.HELD_BY_OTHER, out.cur.get(f.holder),
                                       out.cur.get(f.scope), None, self.context.public(out.cur))

    def release_finalization(self, key: object, holder: str,
                             scope: str | None = None) -> Op[ReleaseResult]:
        """Owner-checked on (holder, scope) and idempotent: nothing held, nothing done."""
        if self.binding.finalization is None:
            raise ValidationError(f"{self.binding.table}: the binding has no finalization "
                                  "claim")
        if not isinstance(holder, str) or (scope is not None and not isinstance(scope, str)):
            raise ValidationError("finalization holder and scope must be strings")
        kv = self.binding.key_values(key)
        plans = self.context.plans
        cached = plans.get(("frelease",))
        if cached is None:
            stmt = self.context.compiler.conditional_update(
                self.rules.checks("release_finalization", Ask(), {}),
                self.rules.finalization_release_sets())
            template = self.context.template(stmt, {}, ("fholder", "fscope"))
            cached = plans[("frelease",)] = (stmt, template)
        stmt, template = cached
        if template is not None:
            rows = yield _new(Batch, (((template.sql,
                                        template.bind(kv, named=(holder, scope))),),
                                      False, None))
        else:
            _, values = self.inputs.values(kv)
            values.update(fholder=holder, fscope=scope)
            rows = yield Batch((stmt.bind(self.context.dialect, values),))
        return ReleaseResult(bool(rows[0]))

    def finalization_checks(self, key: object, holder: str, scope: str | None = None,
                            ) -> tuple[Check, Check, dict[str, Any]]:
        """(the claim's check, the release's check, their values): the rules as data."""
        f = self._checked(holder, scope)
        _, values = self.inputs.values(key)
        values.update(fholder=holder, fscope=scope, fttl=float(f.ttl))
        (claim,) = self.rules.checks("claim_finalization", Ask(), values)
        (release,) = self.rules.checks("release_finalization", Ask(), values)
        return claim, release, values

    def _checked(self, holder: object, scope: object) -> FinalizationClaim:
        f = self.binding.finalization
        if f is None:
            raise ValidationError(f"{self.binding.table}: the binding has no finalization "
                                  "claim")
        if not isinstance(holder, str) or not holder:
            raise ValidationError(f"finalization holder must be a non-empty string, "
                                  f"got {holder!r}")
        check_scalar(holder, "holder", ValidationError)
        if scope is not None:
            if not isinstance(scope, str):
                raise ValidationError(f"finalization scope must be a string, got {scope!r}")
            check_scalar(scope, "scope", ValidationError)
        return f
