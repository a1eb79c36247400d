"""The pub's mail, in parts that import one way (``mailer`` -> ``compose`` -> ``schedule``
-> ``html``, ``wording``, ``values`` -> ``settings`` -> ``addresses``):

=============  ============================================================================
``addresses``  the one rule of a valid address and name (tenders, the sender, the operator)
``settings``   the mail settings, read once from the environment (``PUBSCHED_SMTP_*``...)
``values``     the frozen inputs of a message (a recipient, a shift line, a roster, links)
``wording``    how days, shifts and the zone read (one label per shift), for mail and pages
``html``       inline-styled HTML pieces that mail apps on a phone lay out as meant
``schedule``   the schedule email's text and HTML bodies
``compose``    every message built without I/O: the schedule email, the operator's notes
``mailer``     SMTP (or the log, with no host configured): hands a composed message over
               and reports the outcome, never raises for a refused recipient
=============  ============================================================================

Kept empty on purpose: callers import the part they need.
"""
