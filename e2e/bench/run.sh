#!/usr/bin/env bash
# Runs every measurement of issue 8 (performance, side by side, as ratios), issue 13
# (flip latency by fleet size through both providers, store requests per node per tick,
# before and after) and issue 17 (ingress groups through real Traefiks) in one go and
# writes e2e/bench/REPORT.md. About 50 minutes on a 2-core machine.
#
#   e2e/bench/run.sh
#
# Needs: Go, wrk and nginx (Debian: apt-get install -y wrk nginx-light; installed here
# when missing and running as root), Traefik v3.6.12 (TRAEFIK_BIN, else built and cached
# by e2e/build-traefik.sh), perf (optional: profiles of the node under load).
#
# Knobs (environment):
#   SCAFO_BENCH_ROUNDS=3        interleaved rounds per side of the poll comparison
#   SCAFO_BENCH_WRK="-t2 -c32 -d8s"   wrk load for every comparison (durations: poll 8s, Traefik 5s)
#   SCAFO_BENCH_PROFILE=1       perf-profile the node under load (0 to skip)
#   SCAFO_BENCH_TRAEFIK_CASES="100 apps|10 000 apps"   only these Traefik cases
#   SCAFO_BENCH_REPORT=path     where the report goes (default e2e/bench/REPORT.md)
#   RUN=regexp                  only the tests matching (go test -run)
#   SCAFO_BENCH_FLIP_SIZES="100 1000 10000"   fleet sizes of the flip-latency rows (issue 13)
#   SCAFO_BENCH_FLIPS=20        flips per row (10 000 apps with the HTTP provider: ~8 s each)
#   SCAFO_BENCH_FLIP_ROUNDS=1   rounds of every flip row (2 on a quiet machine)
#   SCAFO_BENCH_FLIP_QUIET="10000"   sizes also measured with health checks at 1h ("" for none)
#   SCAFO_BENCH_GROUPS=1        issue 17's ingress groups (section 8: 10 000 apps in 10 groups, a
#                               plugin Traefik per group read, flips in one; 0 to skip; ~5 min)
#   SCAFO_BENCH_GROUPS_APPS=10000 SCAFO_BENCH_GROUPS_N=10 SCAFO_BENCH_GROUPS_TRAEFIKS=3
#                               its fleet, groups, and Traefiks (the flips' group + observers);
#                               SCAFO_BENCH_FLIPS sets its flips too
#   SCAFO_BENCH_GROUPS_CONTROL=1   also flip through an every-group Traefik (0 to skip)
#   SCAFO_BENCH_BEFORE_REF=e8756a7   the commit before issue 13: built in a temporary git
#                               worktree, its scafo-node and plugin measured beside this
#                               tree's in the same run ("" to skip)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "run.sh: installing ${missing[*]} with apt-get" >&2
    apt-get install -y "${missing[@]}" >&2 || { apt-get update >&2 && apt-get install -y "${missing[@]}" >&2; }
  else
    echo "run.sh: missing ${missing[*]}: apt-get install -y wrk nginx-light" >&2
    exit 1
  fi
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "run.sh: building scafo-node" >&2
go build -o "$tmp/scafo-node" ./node/cmd/scafo-node
# The code before issue 13 (store cost, health checks sized for the fleet, serial order),
# measured beside this tree in the same run: a temporary worktree of that commit.
before_ref="${SCAFO_BENCH_BEFORE_REF-e8756a7}"
before_env=()
if [[ -n "$before_ref" ]]; then
  before_dir="$tmp/before"
  trap 'git -C "$root" worktree remove --force "$before_dir" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  echo "run.sh: building scafo-node at $before_ref (git worktree in $before_dir)" >&2
  git -C "$root" worktree add --detach "$before_dir" "$before_ref" >&2
  (cd "$before_dir" && go build -o "$tmp/scafo-node-before" ./node/cmd/scafo-node)
  before_env=(SCAFO_BENCH_BEFORE_REF="$before_ref"
    SCAFO_BENCH_BEFORE_NODE="$tmp/scafo-node-before"
    SCAFO_BENCH_BEFORE_PLUGIN="$before_dir/traefikprovider")
fi
traefik="${TRAEFIK_BIN:-$(bash e2e/build-traefik.sh | tail -n1)}"
echo "run.sh: Traefik $traefik" >&2

profile="${SCAFO_BENCH_PROFILE:-1}"
command -v perf >/dev/null || profile=0

log="$tmp/bench.log"
set +e
env "${before_env[@]}" SCAFO_BENCH=1 \
  SCAFO_NODE_BIN="$tmp/scafo-node" \
  SCAFO_BENCH_FLIP_QUIET="${SCAFO_BENCH_FLIP_QUIET-10000}" \
  SCAFO_BENCH_GROUPS="${SCAFO_BENCH_GROUPS-1}" \
  TRAEFIK_BIN="$traefik" \
  SCAFO_BENCH_PROFILE="$profile" \
  SCAFO_BENCH_ROUNDS="${SCAFO_BENCH_ROUNDS:-3}" \
  SCAFO_BENCH_REPORT="${SCAFO_BENCH_REPORT:-$here/REPORT.md}" \
  go test -count=1 -timeout 90m -v -run "${RUN:-.}" ./e2e/bench/ 2>&1 |
  grep -v 'Health check failed' | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "run.sh: report in ${SCAFO_BENCH_REPORT:-$here/REPORT.md} (go test exit $rc)" >&2
exit "$rc"
