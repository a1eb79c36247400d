"""The pub's web front end: the operator's admin and the tenders' personal pages.

A thin front end over the same domain the CLI uses: every button is one call of
:func:`pubsched.actions.perform`, every page a view of :mod:`pubsched.view`. What lives here
is only what a browser needs: the login and its cookie, the cross-site check, the forms,
the templates (``templates/``) and the static files (``static/``: the vendored mermaid.js,
the stylesheet, the one small script). ``create_app`` (:mod:`pubsched.web.app`) builds the
ASGI app; ``serve.main`` runs it with the every-minute tick.
"""
