# Baton server image. `docker compose up` (docker-compose.yml) runs two of these behind nginx.
# Without BATON_DATABASE_URL the server starts its embedded PostgreSQL in BATON_DATA_DIR.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    BATON_DATA_DIR=/var/lib/baton

RUN useradd --create-home --uid 10001 baton \
    && install -d -o baton -g baton /var/lib/baton

WORKDIR /src
# Only what the wheel needs (no .venv or caches from the build context).
COPY pyproject.toml README.md ./
COPY src ./src
COPY migrations ./migrations
RUN pip install . && rm -rf /src

USER baton
WORKDIR /home/baton
VOLUME ["/var/lib/baton"]
EXPOSE 8000

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]

CMD ["baton", "serve", "--host", "0.0.0.0", "--port", "8000"]
