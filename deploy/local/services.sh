#!/usr/bin/env bash
# Local servers for the PostgreSQL leg of the tests, the browser tests and the load bench:
# installs what is missing from Debian's packages (one quiet `apt-get update`, only when
# something is missing), then starts PostgreSQL on 127.0.0.1:5432 (127.0.0.1 trusted, so
# `psql -h 127.0.0.1 -U postgres` works as the tests expect) and Redis on 127.0.0.1:6379, and
# waits until both answer. Idempotent: a machine that already has everything running is left
# as it is (a second run installs nothing and restarts nothing).
#
#   deploy/local/services.sh           install what is missing, start what is down
#   deploy/local/services.sh install   only install (PostgreSQL, Redis, Chromium, wrk)
#   deploy/local/services.sh start     only start PostgreSQL and Redis
#
# Used by .ci/run and ./dev services. Needs root (or sudo) only when it has to install.
set -euo pipefail

PG_PORT=5432
REDIS_PORT=6379

say() { echo "services: $*"; }
die() { echo "services: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "needs root to run: $*"
  fi
}

# Seconds since $1 (an epoch from `date +%s`), for the step timings CI's log shows.
since() { echo "$(($(date +%s) - $1)) s"; }

pg_server_installed() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }

missing_packages() {
  local missing=()
  pg_server_installed || missing+=(postgresql)
  command -v redis-server >/dev/null || missing+=(redis-server)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  command -v wrk >/dev/null || missing+=(wrk)
  echo "${missing[@]}"
}

install_missing() {
  local missing
  missing=$(missing_packages)
  if [ -z "$missing" ]; then
    say "PostgreSQL, Redis, Chromium and wrk already installed"
    return
  fi
  local started
  started=$(date +%s)
  say "installing from Debian's packages: $missing"
  say "disk before: $(df -h --output=avail / | tail -1 | tr -d ' ') free"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $missing >/dev/null
  say "installed in $(since "$started"); disk after: $(df -h --output=avail / | tail -1 | tr -d ' ') free"
}

pg_answers() { pg_isready -h 127.0.0.1 -p "$PG_PORT" -q 2>/dev/null; }
pg_trusts_us() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc 'SELECT 1' >/dev/null 2>&1; }

# The newest installed version's cluster `main`, created when the package left none.
pg_cluster() {
  local version
  version=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -n | tail -1)
  [ -n "$version" ] || die "no PostgreSQL server under /usr/lib/postgresql"
  if [ ! -f "/etc/postgresql/$version/main/postgresql.conf" ]; then
    say "creating PostgreSQL $version cluster main" >&2
    as_root pg_createcluster --port "$PG_PORT" "$version" main >/dev/null
  fi
  echo "$version"
}

# A fresh Debian cluster wants scram on 127.0.0.1; the test cluster trusts loopback instead
# (lines at the top of pg_hba.conf win). Never touches a cluster that already lets us in.
pg_trust_loopback() {
  local hba="/etc/postgresql/$1/main/pg_hba.conf"
  if ! as_root grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    say "trusting 127.0.0.1 and ::1 in $hba"
    as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
}

start_postgres() {
  if pg_answers && pg_trusts_us; then
    say "PostgreSQL answers on 127.0.0.1:$PG_PORT"
    return
  fi
  local started version
  started=$(date +%s)
  version=$(pg_cluster)
  pg_trust_loopback "$version"
  if pg_answers; then
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  else
    say "starting PostgreSQL $version"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
  fi
  for _ in $(seq 60); do pg_answers && pg_trusts_us && break; sleep 0.5; done
  pg_trusts_us || die "PostgreSQL does not let postgres in on 127.0.0.1:$PG_PORT (see /var/log/postgresql/)"
  say "PostgreSQL up in $(since "$started")"
}

redis_answers() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; }

start_redis() {
  if redis_answers; then
    say "Redis answers on 127.0.0.1:$REDIS_PORT"
    return
  fi
  say "starting Redis"
  local dir=/var/lib/redis log=/var/log/redis
  [ -w "$dir" ] && [ -w "$log" ] || { dir=${TMPDIR:-/tmp}/redis; log=$dir; mkdir -p "$dir"; }
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" \
    --appendonly no --dir "$dir" --logfile "$log/redis-local.log"
  for _ in $(seq 60); do redis_answers && break; sleep 0.5; done
  redis_answers || die "Redis did not answer on 127.0.0.1:$REDIS_PORT (see $log/redis-local.log)"
}

case "${1:-all}" in
  install) install_missing ;;
  start) start_postgres; start_redis ;;
  all) install_missing; start_postgres; start_redis ;;
  *) die "usage: $0 [install|start|all]" ;;
esac
