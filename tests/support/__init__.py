"""What the test packages share: plain helper modules, no fixtures (each package's
conftest.py owns its fixtures). ``tests/`` is on ``sys.path`` (pyproject's pytest
``pythonpath``), so they import as ``support.<module>``.

Services (no pytest; ``bench/`` uses them too):
  services     the find-or-start rule, the environment variables, ServiceUnavailable (no driver)
  pg_server    a PostgreSQL server: found, or a throwaway cluster we start
  databases    databases on it: made, cloned from a template, dropped
  nats_server  a NATS JetStream server: found, or ``nats-server -js`` we start
  smtp_server  a real SMTP server on loopback (aiosmtpd) that can refuse, fail and hang

The engine (tests/rowstate) and the dataset lifecycle (tests/dataset_lifecycle):
  engine       the test machines and ``Backend`` (one body, {sqlite, postgres} x {sync, async})
  races        the races' binding, independent readers, worker processes (also a script)
  strategies   hypothesis strategies for the bad-input proofs
  dataset      dataset_lifecycle's persistence paths (``Env``) and direct row pokes

The pub scheduler (tests/pubsched):
  pubs         the week and moment the tests run at, the mail settings, make_pub, a crew
  pub_db       empty databases and clones of one migrated once per session
  pub_engines  the legacy and cutover tests' own weeks, tenders and moments
  pub_web      the web tests' settings, login and page scraping
  pub_cli      the operator CLI in-process, and every table's rows
  line_child   a warm child process that serves every round of a process race
  mail_samples a small roster and its people, for the mail tests
"""
