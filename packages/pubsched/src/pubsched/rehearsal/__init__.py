"""The cutover's dress rehearsal (issue 17 item 7): one complete real lifecycle of a week
on the v2 engine, on a throwaway copy of the pub (its tenders and shift template, no
weeks), every email to the operator only; its outcome recorded in the real database, where
a passed one is what turning v2 on over real weeks requires
(:func:`pubsched.engines.cutover.flip`).

=============  ===============================================================================
``scratch``    the throwaway copy: a schema (PostgreSQL) or a temporary file (SQLite), made,
               filled, opened with its mail locked to the operator, dropped
``steps``      the nine steps, each a v2 action on the copy that checks its own outcome
``record``     the ``pub_rehearsals`` table: the outcome, and the wizard's state and claim
``wizard``     start, one step (the web), every step (the CLI), stop
=============  ===============================================================================

Imports run one way: ``wizard`` -> ``steps``, ``scratch``, ``record``; the cutover imports
``record`` alone.
"""

from .record import ABANDONED, FAILED, PASSED, STEP_TTL, Rehearsal
from .steps import STEPS, Step
from .wizard import REHEARSAL_RUNNING, STEP_TAKEN, Refused, StepResult, run_all, start, step, stop

__all__ = ["ABANDONED", "FAILED", "PASSED", "REHEARSAL_RUNNING", "STEPS", "STEP_TAKEN",
           "STEP_TTL", "Refused", "Rehearsal", "Step", "StepResult", "run_all", "start",
           "step", "stop"]
