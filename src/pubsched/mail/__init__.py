"""The pub's mail, in three parts that import one way (``mailer`` -> ``compose`` ->
``settings``):

=============  ============================================================================
``settings``   the mail settings, read once from the environment (``PUBSCHED_SMTP_*``...)
``compose``    every message built without I/O: the schedule email, the operator's nudges
``mailer``     SMTP (or the log, with no host configured): hands a composed message over
               and reports the outcome, never raises for a refused recipient
=============  ============================================================================

Kept empty on purpose: callers import the part they need.
"""
