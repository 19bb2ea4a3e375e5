#!/usr/bin/env bash
# Fuzzes `graphctl serve`'s API from its own OpenAPI description with schemathesis (from PyPI, in a
# virtualenv of its own under target/): every endpoint, generated parameters and bodies, every check
# (no 5xx, answers match the described status codes and content types, ...), with the server's token so
# the actions are reached too. The store is one the versioning example fills (runs of two versions,
# completed and waiting). Prints schemathesis's summary; exits with its status.
#
#   scripts/schemathesis.sh [max examples per operation, default 100]
set -euo pipefail
cd "$(dirname "$0")/.."
examples=${1:-100}
venv=target/schemathesis-venv
if [ ! -x "$venv/bin/schemathesis" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'schemathesis==4.32.5'
fi
cargo build --quiet -p graphctl-examples
store=$(cargo run --quiet -p graph-examples --example versioning | sed -n 's/.*--store \(.*\) runs$/\1/p')
work=$(mktemp -d)
printf 'schemathesis-%s%s%s\n' "$RANDOM" "$RANDOM" "$RANDOM" > "$work/token"
port=$((20000 + RANDOM % 20000))
target/debug/graphctl-examples --store "$store" serve --listen "127.0.0.1:$port" --token-file "$work/token" \
    2> "$work/server.log" &
server=$!
cleanup() {
    kill "$server" 2> /dev/null || true
    wait "$server" 2> /dev/null || true
    rm -rf "$work" "$store"
}
trap cleanup EXIT
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/api/openapi.json" > /dev/null && break
    sleep 0.1
done
"$venv/bin/schemathesis" run "http://127.0.0.1:$port/api/openapi.json" \
    --checks all --max-examples "$examples" --generation-deterministic \
    --header "Authorization: Bearer $(cat "$work/token")" || status=$?
trap - EXIT
cleanup
exit "${status:-0}"
