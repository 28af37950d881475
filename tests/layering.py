#!/usr/bin/env python3
"""Checks the layering rules that the include path alone cannot (docs/architecture.md, "Layers").

The include root is the source root, so any file could name any header; this check refuses
what the layers forbid:
  * a layer's header included without its layer's name ("graph.hpp" instead of
    "runtime/graph.hpp"): a bare name could silently mean another layer's file;
  * a wrong-way include: scheduler/ and comm/ know nothing of each other or of the layers
    above; runtime/ builds on both; api/ on all three; its public headers on <ordo/...> only;
  * apps/ using anything but the public API, tools/ using a layer beyond what they are allowed;
  * stencil/ and sparse/ (libraries on the public API) using anything but <ordo/...> and their
    own files;
  * a third-party library touched outside the one file that owns it.

Usage: layering.py SOURCE_ROOT. Prints one line per violation and exits 1, or prints "ok".
"""
import os
import re
import sys

LAYERS = ("scheduler", "comm", "runtime", "api", "stencil", "sparse")
# What each folder may include of the layers (by layer name, or by exact header path).
ALLOWED = {
    "scheduler": {"scheduler"},
    "comm": {"comm"},
    "runtime": {"runtime", "scheduler", "comm"},
    "api": {"api", "runtime", "scheduler", "comm"},
    "api/include": set(),
    "stencil": {"stencil"},
    "stencil/include": set(),
    "sparse": {"sparse"},
    "sparse/include": set(),
    "apps": set(),
    # Outputs and inputs only onto regular files: one mechanism for every program.
    "apps/common": {"runtime/regular_file.hpp"},
    "tools/ordorun": {"comm/store_protocol.hpp"},
    "tools/ordo-trace": {"runtime/trace_format.hpp", "runtime/regular_file.hpp"},
    "tests": set(LAYERS),
}
# Third-party headers (include prefix) and the only files that may include them.
THIRD_PARTY = {
    "hwloc": {"scheduler/topology.cpp"},
    "boost/": {"scheduler/fiber.cpp"},
    "ucp/": {"comm/transport.cpp"},
    "ucs/": {"comm/transport.cpp"},
    "uct/": {"comm/transport.cpp"},
    "pmix": {"comm/bootstrap_pmix.cpp"},
    "metis": {"sparse/metis.cpp"},
    "petsc": {"apps/baselines/petsc_cg.cpp"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def area(rel):
    """The most specific key of ALLOWED that contains the file."""
    best = None
    for key in ALLOWED:
        if rel == key or rel.startswith(key + "/"):
            if best is None or len(key) > len(best):
                best = key
    return best


def main():
    root = os.path.abspath(sys.argv[1])
    problems = []
    for top in LAYERS + ("apps", "tools", "tests"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".cpp", ".hpp", ".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                key = area(rel)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        quote, target = m.groups()
                        where = "%s:%d" % (rel, lineno)
                        if quote == "<":
                            for prefix, owners in THIRD_PARTY.items():
                                if target.startswith(prefix) and rel not in owners:
                                    problems.append("%s: <%s> may only be included by %s" %
                                                    (where, target, ", ".join(sorted(owners))))
                            continue
                        head = target.split("/")[0]
                        if head in LAYERS and os.path.exists(os.path.join(root, target)):
                            allowed = ALLOWED.get(key, set())
                            if head not in allowed and target not in allowed:
                                problems.append('%s: "%s" is a wrong-way include (%s may use %s)' %
                                                (where, target, key,
                                                 ", ".join(sorted(allowed)) or "only <ordo/...>"))
                            continue
                        if "/" not in target and os.path.exists(os.path.join(dirpath, target)):
                            if rel.split("/")[0] in LAYERS:
                                problems.append('%s: "%s" names no layer; write "%s"' %
                                                (where, target,
                                                 os.path.relpath(os.path.join(dirpath, target), root)))
                            continue
                        for layer in LAYERS:
                            if os.path.exists(os.path.join(root, layer, target)):
                                problems.append('%s: "%s" names no layer; write "%s/%s"' %
                                                (where, target, layer, target))
    for p in problems:
        print(p)
    if problems:
        print("%d layering violation(s); see tests/layering.py for the rules" % len(problems))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
