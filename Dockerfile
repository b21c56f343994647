FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/sweepbot
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY workers ./workers
COPY migrations ./migrations
# Editable: the migrations and alembic.ini stay beside the package, where app/migrate.py finds them.
RUN pip install -e . && useradd --system --home /srv/sweepbot sweepbot && mkdir -p /data && chown sweepbot /data
USER sweepbot
ENV SWEEPBOT_DATA_DIR=/data
EXPOSE 8000
CMD ["sweepbot", "api", "--host", "0.0.0.0", "--port", "8000"]
