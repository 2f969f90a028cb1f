# One image for web, worker and beat (docker-compose.yml picks the command).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=portal.settings.production \
    PORTAL_VAR_DIR=/var/lib/portal

WORKDIR /app
COPY requirements/ requirements/
RUN pip install --no-cache-dir -r requirements/base.lock

COPY . .
RUN mkdir -p /var/lib/portal \
 && SECRET_KEY=build-only python manage.py collectstatic --noinput \
 && useradd --system --uid 1000 portal && chown -R portal /var/lib/portal
USER portal

EXPOSE 8000
# Workers, worker class, keep-alive and logs: gunicorn.conf.py (WEB_CONCURRENCY etc.).
CMD ["gunicorn", "portal.wsgi:application", "--config", "gunicorn.conf.py"]
