"""The chaos harness of issue 4: randomized concurrent histories checked by an oracle.

* :mod:`chaos.machine`: the machine and binding every chaos run uses, and table setup;
* :mod:`chaos.worker`: one worker process (``python -m chaos.worker``), logging what it saw;
* :mod:`chaos.harness`: runs a round of workers, kills some with SIGKILL, sweeps for stuck rows
  and loads the resulting history;
* :mod:`chaos.oracle`: checks a history property by property (it is pure: it reads data);
* :mod:`chaos.model`: the in-memory model of the machine for the hypothesis state machine.

``tests/`` is on ``sys.path`` (pyproject's pytest ``pythonpath``), so this package imports as
``chaos``; the worker processes get ``tests/`` on ``PYTHONPATH`` from the harness.
"""
