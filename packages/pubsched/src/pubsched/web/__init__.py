"""The pub's web front end: the operator's admin and the tenders' personal pages.

A thin front end over the same domain the CLI uses: every button is one call of
:func:`pubsched.engines.actions.perform` (the buttons themselves are rows of that module's
table of actions), every page a view of :mod:`pubsched.week.view`. What lives here is only what
a browser needs: the login and its cookie, the cross-site check, the forms,
the templates (``templates/``) and the static files (``static/``: the vendored mermaid.js,
the stylesheet, the one small script). ``create_app`` (:mod:`pubsched.web.app`) builds the
ASGI app; ``serve.main`` runs it with the every-minute tick.

Split the way Datasette splits its views, one job per module, each importing only those
listed after it (and the domain)::

    serve      uvicorn and the ticker                               -> app, logs, settings
    app        create_app: routes, gates, lifespan, the crash page  -> admin, tender, login,
                                                                       limits, logs, security,
                                                                       proxy, site
    admin      the operator's pages: weeks, a week, tenders, cutover -> buttons, forms, site
    tender     a tender's form and calendar feed (signed links)      -> forms, site
    login      login and logout                                      -> forms, site, auth
    buttons    which edge is which button; pressing one             -> forms, site
    security   the cross-origin check and headers; the admin gate    -> auth, logs, pages
    limits     request bodies too big: 413 before reading more       -> pages
    site       what handlers share: pub, settings, clock, sessions   -> pages, settings, auth
    pages      templates, the ``local`` filter, the flash cookie
    forms      reading posted fields
    settings   WebSettings, from the environment                    -> auth, proxy
    logs       a tender link in a log line: its tender, not its token
    proxy      the real client behind a trusted proxy (ASGI middleware)
    auth       password, login throttle, sessions, the cross-origin rule (no ASGI)
"""
