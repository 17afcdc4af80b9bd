"""Headless "browser" for logins in tests (stdlib only): GET the authorization URL given as
the last argument and follow its redirects, which end at openpact's loopback callback. Works
with authorization servers that redirect at once (the conformance suite's, the test fixture's)."""
import sys
import urllib.request

try:
    with urllib.request.urlopen(sys.argv[-1], timeout=20) as r:
        r.read()
except Exception as e:  # the callback page may close the connection; the login goes on anyway
    print(f"browser.py: {e}", file=sys.stderr)
