"""The commands, one module per subject; each command is ``handler(ctx, args) -> exit code``.

A command parses nothing and decides nothing: it opens the pub through its context, calls
one domain function and reports what that function said. They import the CLI's context and
output and the domain below them, never the parser or the dispatcher (:mod:`..dispatch`), which
import them.
"""
