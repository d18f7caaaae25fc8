#!/usr/bin/env bash
# devdb.sh prints the URL of a PostgreSQL server for local development,
# starting one when none answers. `make run` uses it. Safe to run again:
# a running server is reused, a stopped one started, nothing is recreated.
#
#   1. a server on 127.0.0.1:5432 answers            -> its URL
#   2. our private cluster under ./.pgdata is running -> its URL
#   3. an installed Debian cluster can be started     -> start it, its URL
#   4. otherwise initdb a private cluster in ./.pgdata (trust auth, a free
#      port from 55432, its unix socket in that folder), start it, its URL
#
# Only the URL goes to stdout; progress goes to stderr.
# SWITCHBOARD_DEVDB_PRIVATE=1 skips steps 1 and 3 (to try step 4).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
pgdata="$root/.pgdata"
dbname=switchboard

say() { echo "devdb: $*" >&2; }
die() { say "$*"; exit 1; }
url() { echo "postgres://postgres@127.0.0.1:$1/$dbname?sslmode=disable"; }
ready() { pg_isready -q -h 127.0.0.1 -p "$1" -t 2 >/dev/null 2>&1; }

wait_ready() { # port: up to 30 s
	for _ in $(seq 60); do
		ready "$1" && return 0
		sleep 0.5
	done
	return 1
}

command -v pg_isready >/dev/null || die "pg_isready not found: install PostgreSQL (apt-get install postgresql)"

private_only=${SWITCHBOARD_DEVDB_PRIVATE:-}

# 1. Something already answers on the default port.
if [[ -z $private_only ]] && ready 5432; then
	url 5432
	exit 0
fi

# 2. Our private cluster is running.
if [[ -f $pgdata/devdb.port ]] && ready "$(cat "$pgdata/devdb.port")"; then
	url "$(cat "$pgdata/devdb.port")"
	exit 0
fi

# 3. An installed cluster (Debian's postgresql-common) can be started.
if [[ -z $private_only && ! -d $pgdata ]] && command -v pg_ctlcluster >/dev/null && [[ -d /etc/postgresql ]]; then
	for version in $(ls /etc/postgresql); do
		[[ -d /etc/postgresql/$version/main ]] || continue
		say "starting the installed cluster $version/main"
		if pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 2>&1 && wait_ready 5432; then
			url 5432
			exit 0
		fi
		say "could not start cluster $version/main; trying a private cluster"
	done
fi

# 4. A private cluster under ./.pgdata.
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
[[ -n $bindir && -x $bindir/initdb ]] || die "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: install postgresql"

# PostgreSQL refuses to run as root: use the postgres account then.
as_owner() { "$@"; }
if [[ $(id -u) == 0 ]]; then
	id postgres >/dev/null 2>&1 || die "running as root and no postgres account to run the cluster as"
	as_owner() { runuser -u postgres -- "$@"; }
fi

if [[ ! -f $pgdata/PG_VERSION ]]; then
	port=55432
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		port=$((port + 1))
		((port < 55500)) || die "no free port in 55432-55499"
	done
	say "creating a private cluster in $pgdata on port $port"
	mkdir -p "$pgdata"
	[[ $(id -u) == 0 ]] && chown postgres: "$pgdata"
	as_owner "$bindir/initdb" -D "$pgdata" -U postgres --auth=trust --encoding=UTF8 >&2
	echo "$port" >"$pgdata/devdb.port"
fi
port=$(cat "$pgdata/devdb.port")

if ! ready "$port"; then
	say "starting the private cluster on port $port"
	as_owner "$bindir/pg_ctl" -D "$pgdata" -l "$pgdata/server.log" -w \
		-o "-p $port -c listen_addresses=127.0.0.1 -k $pgdata" start >&2 ||
		die "could not start the private cluster; see $pgdata/server.log"
	wait_ready "$port" || die "the private cluster does not answer; see $pgdata/server.log"
fi
url "$port"
