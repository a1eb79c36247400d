"""pubsched's schema, as numbered plain SQL files: one file per version per dialect.

``NNNN_name.sqlite.sql`` and ``NNNN_name.postgresql.sql`` hold the same version for each
database (every version has both; :mod:`pubsched.db.migrate` refuses a package where one is
missing). The numbers follow the seed's line: 0001 the base tables, then 0032-0035 as the
seed names them, then 0036 for rowstate's engine columns and events table, and from 0037
on the application's own additions (0037: ``pub_tenders.link_version``; 0038: the
pub's shift template, the skills shifts need and tenders have).

Rules for a file, so that the runner's plain splitter reads it right:

* statements end with ``;`` at the end of a line (a ``-- comment`` may follow it); a ``;``
  anywhere else (inside a string, a trigger body, a comment's end) is not allowed;
* no ``BEGIN``/``COMMIT``: the runner wraps each file in one transaction of its own;
* never edit a file once it is released: the runner records a checksum of each applied
  file and refuses to go on when an applied one changed. Add a new version instead.
"""
