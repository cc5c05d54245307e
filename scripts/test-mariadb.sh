#!/usr/bin/env bash
# Starts a private MariaDB server for the test suite: a new data directory under $1 (default: a new
# temporary directory), listening on 127.0.0.1:${MARIADB_PORT:-3307} only, never the system service.
# Prints the TEST_MYSQL_URL to use. Stop it with: kill "$(cat <dir>/mariadb.pid)".
# max_allowed_packet holds the largest upload the tests send in one statement (an attachment of 100 MiB,
# as prepared-statement binary). Its temporary files go to its own directory, out of reach of whatever
# cleans the machine's /tmp while the suite runs.
set -euo pipefail
dir="${1:-$(mktemp -d -t cra-mariadb-XXXXXX)}"
port="${MARIADB_PORT:-3307}"
mkdir -p "$dir/tmp"
if [ ! -d "$dir/data/mysql" ]; then
  mariadb-install-db --no-defaults --datadir="$dir/data" --auth-root-authentication-method=normal \
    --skip-test-db --user="$(id -un)" >"$dir/install.log" 2>&1
fi
mariadbd --no-defaults --datadir="$dir/data" --socket="$dir/mariadb.sock" --port="$port" \
  --bind-address=127.0.0.1 --user="$(id -un)" --pid-file="$dir/mariadb.pid" --log-error="$dir/error.log" --tmpdir="$dir/tmp" \
  --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=1 --max-connections=500 \
  --max-allowed-packet=256M \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
  --sql-mode=STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION >/dev/null 2>&1 &
for _ in $(seq 1 60); do
  mariadb-admin --no-defaults -S "$dir/mariadb.sock" -uroot ping >/dev/null 2>&1 && break
  sleep 0.5
done
mariadb-admin --no-defaults -S "$dir/mariadb.sock" -uroot ping >/dev/null
mariadb --no-defaults -S "$dir/mariadb.sock" -uroot -e "
  create user if not exists 'cra'@'127.0.0.1' identified by 'cra';
  grant all on *.* to 'cra'@'127.0.0.1' with grant option;
  create database if not exists cra_ci character set utf8mb4 collate utf8mb4_unicode_ci;"
echo "mysql://cra:cra@127.0.0.1:$port/cra_ci"
