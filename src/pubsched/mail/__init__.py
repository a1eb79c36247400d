"""The pub's mail, in four parts that import one way (``mailer`` -> ``compose`` ->
``settings`` -> ``addresses``):

=============  ============================================================================
``addresses``  the one rule of a valid address and name (tenders, the sender, the operator)
``settings``   the mail settings, read once from the environment (``PUBSCHED_SMTP_*``...)
``compose``    every message built without I/O: the schedule email, the operator's nudges
``mailer``     SMTP (or the log, with no host configured): hands a composed message over
               and reports the outcome, never raises for a refused recipient
=============  ============================================================================

Kept empty on purpose: callers import the part they need.
"""
