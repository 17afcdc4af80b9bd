#!/usr/bin/env bash
# The command the conformance suite runs for its client scenarios; it appends the server URL.
exec python3 "$(dirname "${BASH_SOURCE[0]}")/client.py" "$@"
