#!/usr/bin/env python3
"""The worked example of docs/stencil.md cannot rot.

  example_test.py EXAMPLE_BINARY EXAMPLE_SOURCE DOCS_PAGE

The source's lines from `int main() {` to its closing brace must appear in the docs page as
they are, and the binary's output (steps=N change=C u=U) must equal a plain Jacobi loop written
here: the same steps, and the same bits of the last step's largest change and of one point.
"""
import re
import subprocess
import sys


def main():
    binary, source, docs = sys.argv[1:4]
    code = open(source).read()
    body = code[code.index("int main() {"):code.rindex("}") + 1]
    if body not in open(docs).read():
        print(f"{docs} does not quote {source}'s main() as it is; copy it there again")
        return 1
    out = subprocess.run([binary], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        print(out.stdout, out.stderr)
        return 1
    m = re.fullmatch(r"steps=(\d+) change=(\S+) u=(\S+)\n", out.stdout)
    if not m:
        print("unexpected output:", out.stdout)
        return 1
    # The loop: 32 x 24 points, a ghost layer holding 1 above row 0 and 0 elsewhere.
    rows, cols, w = 32, 24, 26
    u = [0.0] * ((rows + 2) * w)
    for j in range(w):
        u[j] = 1.0
    v = list(u)
    steps, change = 0, 0.0
    while steps < 5000:
        change = 0.0
        for i in range(1, rows + 1):
            for j in range(1, cols + 1):
                x = i * w + j
                nxt = 0.25 * ((u[x - w] + u[x + w]) + (u[x - 1] + u[x + 1]))
                d = abs(nxt - u[x])
                change = d if change < d else change
                v[x] = nxt
        u, v = v, u
        steps += 1
        if change <= 1e-3:
            break
    want_u = u[(16 + 1) * w + 12 + 1]
    got = (int(m.group(1)), float(m.group(2)), float(m.group(3)))
    if got != (steps, change, want_u):
        print(f"example: {got}, plain loop: {(steps, change, want_u)}")
        return 1
    print(f"steps={steps}: the example and the plain loop agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
