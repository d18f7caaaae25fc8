"""Generate hostfields_gen.go: which fields of each Apprise scheme's URL
name a host that Apprise connects to, found by asking the installed Apprise.

    /usr/bin/python3 sinks/apprise/testdata/hostfields.py > sinks/apprise/hostfields_gen.go

(go generate ./sinks/apprise runs it.) For every service of
apprise.Apprise().details(show_disabled=True), for every URL template it
documents, the generator fills the template's tokens with values that pass
the tokens' own validation, checks that Apprise instantiates the URL, and
then probes (oracle.destinations, which runs the service's notify() with
the network refused and recorded):

  - the host position (the URL's host, after "@" if any): filled with a
    marker name, is the marker among the hosts Apprise tried to reach?
    Host-bearing in every template that instantiates: "always"; in some
    but not others (ntfy://topic vs ntfy://host/topic): "unless cloud".
  - every query argument the service documents (args, and their aliases):
    set to a marker name, is the marker reached?

A service Apprise cannot run here (its Python module is missing) is taken
from its documented tokens: a "host" token makes it "always".
"""
import re
try:
    from re import _constants as sre_constants, _parser as sre_parse
except ImportError:  # Python before 3.11
    import sre_constants
    import sre_parse
import sys
import time

import apprise

import oracle

HOST_MARK = "hm0.example"
HOST_MARK_DOTLESS = "hm0example"
ARG_MARK = "am0.example"

# Targets tried, one a variant, for a list of targets.
TARGETS = ["15551234567", "user@example.com", "abcdef0123456789abcdef0123456789", "general"]

# Values tried, in order, for a token, until one passes its regex.
CANDIDATES = [
    "abcdef0123456789abcdef0123456789",
    "123456789:abcdefghijklmnopqrstuvwxyz012345",
    "abcdefghijklmnopqrstuvwxyzABCDEF",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
    "abcdefghij0123456789abcdefghij0123456789abcd",
    "AC0123456789abcdef0123456789abcdef",
    "8b1e1cb6-ff4d-4b4c-9a1e-7f1d2e3c4b5a",
    "0123456789",
    "15551234567",
    "user@example.com",
    "abcd",
    "a",
    "token",
    "us-east-1",
    "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789",
]


def from_regex(pattern, flags):
    """A string that pattern matches, built from its parse tree (the
    shortest repeats, the first branch and the first character of each
    class), or None."""
    try:
        tree = sre_parse.parse(pattern, flags)
    except re.error:
        return None
    C = sre_constants

    def walk(items):
        out = ""
        for op, av in items:
            if op is C.LITERAL:
                out += chr(av)
            elif op is C.IN:
                out += walk([av[0]]) if av[0][0] is not C.NEGATE else "a"
            elif op is C.RANGE:
                out += chr(av[0])
            elif op is C.CATEGORY:
                out += {C.CATEGORY_DIGIT: "1", C.CATEGORY_SPACE: " "}.get(av, "a")
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, hi, sub = av
                n = 0 if lo == 0 else (max(lo, 8) if hi > lo else lo)
                out += walk(sub) * n
            elif op is C.SUBPATTERN:
                out += walk(av[-1])
            elif op is C.BRANCH:
                out += walk(av[1][0])
            elif op is C.ANY:
                out += "a"
        return out

    try:
        return walk(tree)
    except Exception:
        return None


def fits(tok, value):
    rx = tok.get("regex")
    if not rx:
        return True
    flags = re.I if "i" in (rx[1] or "") else 0
    try:
        return re.match(rx[0], value, flags) is not None
    except re.error:
        # Apprise 1.2 ships a few unbalanced patterns; the plugin checks
        # again itself.
        return True


def options(name, tok, schema):
    """The values tried for a token, best first."""
    t = tok.get("type", "string")
    if name == "schema":
        return [schema]
    if t.startswith("choice"):
        return [str(v) for v in tok["values"]]
    if t == "int":
        return ["8080"] if name == "port" else [str(max(int(tok.get("min", 1)), 1))]
    if t == "bool":
        return ["yes"]
    if name in ("host", "hostname"):
        return ["server.example"]
    if name == "path":
        return ["/"]
    out = []
    rx = tok.get("regex")
    if rx:
        v = from_regex(rx[0], re.I if "i" in (rx[1] or "") else 0)
        if v is not None and fits(tok, v):
            out.append(v)
    if "email" in name:
        out.append("user@example.com")
    if t.startswith("list"):
        out += TARGETS
    out += [c for c in CANDIDATES if fits(tok, c) and c not in out]
    return out


def fill(name, tok, schema, variant=0):
    opts = options(name, tok, schema)
    return opts[min(variant, len(opts) - 1)] if opts else None


def service_domain(host):
    """The domain a service's fixed host belongs to: its last two labels
    (api.telegram.org: telegram.org), three under a two-letter
    second-level domain (x.co.uk)."""
    labels = host.lower().rstrip(".").split(".")
    n = 3 if len(labels) > 2 and len(labels[-2]) <= 3 and len(labels[-1]) == 2 else 2
    return ".".join(labels[-n:])


def host_position(template):
    """The token in the template's host position: after "://" and any
    "user@" part, up to ":" "/" or the end."""
    m = re.match(r"\{schema\}://(?:[^/@]*@)?\{(\w+)\}", template)
    return m.group(1) if m else None


def instantiate(template, values):
    try:
        url = template.format(**values)
    except KeyError:
        return None
    ok, hosts = oracle.destinations(url)
    return (url, hosts) if ok else None


def with_arg(url, key, value):
    return url + ("&" if "?" in url else "?") + key + "=" + value


def probe(service):
    d = service["details"]
    tokens, args = d["tokens"], d.get("args", {})
    schemes = []
    for k in ("protocols", "secure_protocols"):
        v = service.get(k) or []
        schemes += [v] if isinstance(v, str) else list(v)
    found = {"host": set(), "args": set(), "probed": 0, "domains": set()}
    if not service.get("enabled", True):
        found["host"] = {"always"} if "host" in tokens else set()
        found["disabled"] = True
        return schemes, found
    for template in d["templates"]:
        base = values = None
        for variant in range(len(CANDIDATES)):
            values = {}
            for name in re.findall(r"\{(\w+)\}", template):
                v = fill(name, tokens.get(name, {}), schemes[0], variant)
                if v is None:
                    break
                values[name] = v
            else:
                base = instantiate(template, values)
                if base is not None:
                    break
        if base is None:
            continue
        found["probed"] += 1
        for h in base[1]:
            if "example" not in h:
                found["domains"].add(service_domain(h))
        hp = host_position(template)
        if hp and hp != "schema":
            # Marked with a name with a dot and one without (a topic or a
            # token may not take a dot). Conclusive only when Apprise
            # reached some host: a service that gives up before
            # connecting says nothing.
            for mark in (HOST_MARK, HOST_MARK_DOTLESS):
                marked = instantiate(template, dict(values, **{hp: mark}))
                if marked is not None and marked[1]:
                    reached = any(h.lower() == mark for h in marked[1])
                    found["host"].add("yes" if reached else "no")
        for key, arg in args.items():
            names = [key] + [a for a in [arg.get("alias_of")] if isinstance(a, str)]
            for n in names:
                _, hosts = oracle.destinations(with_arg(base[0], n, ARG_MARK))
                if any(h.lower() == ARG_MARK for h in hosts):
                    found["args"].add(n)
    if found["host"] == {"yes"}:
        found["host"] = {"always"}
    elif found["host"] == {"yes", "no"}:
        found["host"] = {"unlesscloud"}
    else:
        found["host"] = set()
    return schemes, found


def main():
    rows = {}
    unprobed = []
    for service in apprise.Apprise().details(show_disabled=True)["schemas"]:
        began = time.monotonic()
        schemes, found = probe(service)
        took = time.monotonic() - began
        if took > 2:
            sys.stderr.write("%s: %.1f s\n" % (schemes[0], took))
        if not found.get("disabled") and found["probed"] == 0:
            unprobed.append(schemes[0])
        for s in schemes:
            rows[s] = found
    out = sys.stdout
    out.write("// Code generated by testdata/hostfields.py from Apprise %s; DO NOT EDIT.\n\n" % apprise.__version__)
    out.write("package apprise\n\n")
    out.write("// hostFieldsVersion is the Apprise release hostFields was generated from.\n")
    out.write('const hostFieldsVersion = "%s"\n\n' % apprise.__version__)
    out.write("// hostFields are, per Apprise scheme, the URL fields Apprise connects to\n")
    out.write("// (see testdata/hostfields.py).\n")
    out.write("var hostFields = map[string]hostField{\n")
    for s in sorted(rows):
        f = rows[s]
        mode = {"always": "hostAlways", "unlesscloud": "hostUnlessCloud"}.get(next(iter(f["host"]), ""), "0")
        params = ", ".join('"%s"' % a for a in sorted(f["args"]))
        note = " // not probed: the plugin cannot run here" if f.get("disabled") else ""
        if f.get("disabled") is None and f["probed"] == 0:
            note = " // not probed: no template instantiated"
        out.write('\t"%s": {Mode: %s, Params: []string{%s}},%s\n' % (s, mode, params, note))
    out.write("}\n\n")
    out.write("// serviceDomains are, per Apprise scheme, the domains of the fixed hosts\n")
    out.write("// its service connects to whatever the URL says (api.telegram.org for\n")
    out.write("// tgram): the differential test accepts a host Apprise reaches there.\n")
    out.write("var serviceDomains = map[string][]string{\n")
    for s in sorted(rows):
        if rows[s]["domains"]:
            out.write('\t"%s": {%s},\n' % (s, ", ".join('"%s"' % d for d in sorted(rows[s]["domains"]))))
    out.write("}\n")
    if unprobed:
        sys.stderr.write("no template instantiated for: %s\n" % ", ".join(unprobed))


if __name__ == "__main__":
    main()
