#!/usr/bin/env bash
# The inspector's browser test: installs Debian's chromium and chromium-driver when missing (apt-get; as
# root, as on CI) and Selenium (PyPI, in a virtualenv under target/), fills a store with runs of the
# example graphs (one waiting for an answer, one with hostile markup in its state), serves it with
# `graphctl serve` and a token, and runs scripts/browser_test.py against it. Screenshots in
# target/browser/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium > /dev/null || ! command -v chromedriver > /dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver > /dev/null
fi
venv=target/browser-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import selenium' 2> /dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'selenium==4.27.1'
fi
cargo build --quiet -p graphctl-examples
work=$(mktemp -d)
INSPECTOR_STORE_DIR=$work cargo test --quiet -p graphctl-examples --test serve -- --ignored --exact browser_store > /dev/null
printf 'browser-test-%s%s%s\n' "$RANDOM" "$RANDOM" "$RANDOM" > "$work/token"
port=$((20000 + RANDOM % 20000))
target/debug/graphctl-examples --store "$work/store" serve --listen "127.0.0.1:$port" --token-file "$work/token" \
    2> "$work/server.log" &
server=$!
cleanup() {
    kill "$server" 2> /dev/null || true
    wait "$server" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/api/openapi.json" > /dev/null && break
    sleep 0.1
done
mkdir -p target/browser
"$venv/bin/python" scripts/browser_test.py "http://127.0.0.1:$port" "$(cat "$work/token")" target/browser || status=$?
trap - EXIT
cleanup
exit "${status:-0}"
