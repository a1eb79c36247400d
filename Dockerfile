# syntax=docker/dockerfile:1
# pubsched in a container (docs/pubsched.md, "In a container"). The wheels (pubsched and
# the engine) are built in a first stage and installed into a slim Python, run by a user
# that is not root; the container runs the same two commands as a machine does (tests/pubsched/test_wheel.py
# runs this CMD against the same wheel): `pubsched init`, then `pubsched serve`.
# Serving beyond loopback needs a real PUBSCHED_SECRET (`pubsched secret new`).
# `pubsched backup` on PostgreSQL runs pg_dump, which must be of the server's major version
# or newer: the image has Debian trixie's postgresql-client-17 (it dumps PostgreSQL 17 and
# every older server, compose.yaml's 16 included). /var/lib/pubsched is a volume in
# compose.yaml; the backups go to /var/lib/pubsched/backups (owner only).

FROM python:3.11-slim-trixie AS build
WORKDIR /src
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
# the whole checkout, .git included: each distribution's version is derived from git
COPY . ./
RUN pip wheel --no-cache-dir --no-deps -w /dist packages/rowstate packages/pubsched

FROM python:3.11-slim-trixie
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-client-17 \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --create-home --home-dir /var/lib/pubsched pubsched \
    && install -d -m 0700 -o pubsched -g pubsched /var/lib/pubsched/backups
COPY --from=build /dist/ /tmp/dist/
RUN pip install /tmp/dist/*.whl && rm -rf /tmp/dist
USER pubsched
WORKDIR /var/lib/pubsched
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["sh", "-c", "pubsched init && exec pubsched serve --host 0.0.0.0 --port 8000"]
