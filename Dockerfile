# syntax=docker/dockerfile:1
# pubsched in a container (docs/pubsched.md, "In a container"). The wheels (pubsched and
# the engine) are built in a first stage and installed into a slim Python, run by a user
# that is not root; the container runs the same two commands as a machine does (tests/pubsched/test_wheel.py
# runs this CMD against the same wheel): `pubsched init`, then `pubsched serve`.
# Serving beyond loopback needs a real PUBSCHED_SECRET (`pubsched secret new`).

FROM python:3.11-slim AS build
WORKDIR /src
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
# the whole checkout, .git included: each distribution's version is derived from git
COPY . ./
RUN pip wheel --no-cache-dir --no-deps -w /dist packages/rowstate packages/pubsched

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --system --uid 10001 --create-home --home-dir /var/lib/pubsched pubsched
COPY --from=build /dist/ /tmp/dist/
RUN pip install /tmp/dist/*.whl && rm -rf /tmp/dist
USER pubsched
WORKDIR /var/lib/pubsched
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["sh", "-c", "pubsched init && exec pubsched serve --host 0.0.0.0 --port 8000"]
