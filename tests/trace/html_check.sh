#!/usr/bin/env bash
# Runs html_check.py with Debian's python3 (it has python3-pil; a python3 earlier on PATH may
# not). Exit 77: skipped, with the reason on stdout.
if [ ! -x /usr/bin/python3 ]; then echo "SKIP: /usr/bin/python3 is not installed"; exit 77; fi
exec /usr/bin/python3 "$@"
