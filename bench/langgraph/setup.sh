#!/usr/bin/env bash
# Creates bench/.venv and installs the LangGraph benchmark's requirements.
# Idempotent: re-running reuses the venv and pip skips what is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=bench/.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r bench/langgraph/requirements.txt
