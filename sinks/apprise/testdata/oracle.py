"""The installed Apprise as an oracle of where an Apprise URL connects.

Imported by hostfields.py (the generator of hostfields_gen.go) and run by
the Go tests (destinations_test.go) as one long-lived process that answers
JSON lines: for {"urls": [...]}, one {"results": [...]} line, each result
{"ok": instantiated, "hosts": [every host Apprise tried to reach]}.

Every way a Python library reaches the network (name resolution, connect,
sendto) is replaced by a recorder that refuses: nothing leaves this
process. Apprise then runs the service's own notify(), so the hosts are
those Apprise itself would connect to, whatever field they came from.
"""
import json
import logging
import os
import signal
import socket
import sys
import time

import apprise

_contacted = []


class Refused(socket.gaierror):
    pass


def _record(host):
    if isinstance(host, bytes):
        host = host.decode("utf-8", "replace")
    _contacted.append(str(host))
    raise Refused(socket.EAI_NONAME, "refused by the oracle")


def _addr_host(addr):
    return addr[0] if isinstance(addr, tuple) else addr


socket.getaddrinfo = lambda host, *a, **k: _record(host)
socket.gethostbyname = lambda host: _record(host)
socket.gethostbyname_ex = lambda host: _record(host)
socket.create_connection = lambda addr, *a, **k: _record(_addr_host(addr))
socket.socket.connect = lambda self, addr: _record(_addr_host(addr))
socket.socket.connect_ex = lambda self, addr: _record(_addr_host(addr))
socket.socket.sendto = lambda self, data, *a: _record(_addr_host(a[-1]))
time.sleep = lambda s: None
# Apprise's throttle sleeps between requests (from time import sleep).
apprise.Apprise()  # loads every plugin
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("apprise") and getattr(_mod, "sleep", None) is not None:
        _mod.sleep = time.sleep
logging.disable(logging.CRITICAL)


class TimedOut(BaseException):
    pass


def _timed_out(signum, frame):
    raise TimedOut()


signal.signal(signal.SIGALRM, _timed_out)

# A URL gets this long; Apprise's own loops (throttles, retries) spin
# without sleep here, and a service that still runs past it has shown
# where it connects by then.
LIMIT = float(os.environ.get("APPRISE_ORACLE_LIMIT", "5"))


def destinations(url):
    """(instantiated, hosts): whether Apprise accepts url, and the hosts
    its notify() tried to reach, in order, without repeats."""
    del _contacted[:]
    signal.setitimer(signal.ITIMER_REAL, LIMIT)
    try:
        try:
            obj = apprise.Apprise.instantiate(url, suppress_exceptions=True)
        except Exception:
            obj = None
        if obj is None:
            return False, []
        try:
            obj.notify(body="b", title="t")
        except Exception:
            pass
    except TimedOut:
        sys.stderr.write("oracle: %r ran past %s s\n" % (url, LIMIT))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    seen = []
    for h in _contacted:
        if h not in seen:
            seen.append(h)
    return True, seen


def main():
    trace = os.environ.get("APPRISE_ORACLE_TRACE")
    trace = open(trace, "a") if trace else None
    print(json.dumps({"version": apprise.__version__}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        out = []
        for u in req["urls"]:
            if trace:
                trace.write(json.dumps(u) + "\n")
                trace.flush()
            ok, hosts = destinations(u)
            out.append({"ok": ok, "hosts": hosts})
        print(json.dumps({"results": out}), flush=True)


if __name__ == "__main__":
    main()
