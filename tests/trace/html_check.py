"""The ordo-trace HTML page in headless Chromium.

Renders a heat2d trace of WORKERS workers, then checks that
  - the page logs nothing to the console (no errors, no uncaught exceptions),
  - its script built one timeline row per worker (div.timeline-row, the status line),
  - a screenshot shows one row per worker: each row starts with a stripe of the fixed colour
    rgb(255,0,200), counted down one pixel column.
Exit 77 (skip) with the reason when chromium or python3-pil is missing.
Usage: html_check.py ORDO_TRACE_EXE HEAT2D_EXE
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

WORKERS = 3
STRIPE = (255, 0, 200)


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(77)


def fail(reason):
    print("FAIL: " + reason)
    sys.exit(1)


def chromium(binary, profile, extra, url):
    args = [binary, "--headless", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--user-data-dir=" + profile,
            "--enable-logging=stderr", "--v=0", "--force-device-scale-factor=1",
            "--hide-scrollbars", "--window-size=1200,900"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    out = subprocess.run(args + extra + [url], capture_output=True, text=True, timeout=180)
    if out.returncode != 0:
        fail("chromium exited %d: %s" % (out.returncode, out.stderr[-2000:]))
    console = [line for line in out.stderr.splitlines() if ":CONSOLE" in line]
    if console:
        fail("the page wrote to the console:\n" + "\n".join(console))
    return out.stdout


def main():
    tool, heat = sys.argv[1], sys.argv[2]
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        skip("chromium is not installed (scripts/setup.sh installs Debian's chromium)")
    try:
        from PIL import Image
    except ImportError:
        skip("python3-pil is not installed (scripts/setup.sh installs it)")

    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "heat.trace")
        page = os.path.join(tmp, "page.html")
        subprocess.run([heat, "--size", "192x192", "--blocks", "3x3", "--iters", "5",
                        "--workers", str(WORKERS), "--trace", trace], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([tool, "html", "-o", page, trace], check=True)
        url = "file://" + page

        dom = chromium(binary, os.path.join(tmp, "p1"), ["--dump-dom"], url)
        rows = re.findall(r'<div class="timeline-row" data-rank="(\d+)" data-worker="(\d+)"', dom)
        if sorted(rows) != [("0", str(w)) for w in range(WORKERS)]:
            fail("expected one timeline row per worker, the DOM has %r" % rows)
        if "rendered %d rows" % WORKERS not in dom:
            fail("the page's script did not finish rendering")

        shot = os.path.join(tmp, "shot.png")
        chromium(binary, os.path.join(tmp, "p2"), ["--screenshot=" + shot], url)
        img = Image.open(shot).convert("RGB")
        width, height = img.size
        px = img.load()
        column = next((x for x in range(min(width, 200))
                       if any(px[x, y] == STRIPE for y in range(height))), None)
        if column is None:
            fail("no row stripe in the screenshot")
        runs, inside = 0, False
        for y in range(height):
            hit = px[column, y] == STRIPE
            runs += hit and not inside
            inside = hit
        if runs != WORKERS:
            fail("the screenshot shows %d timeline rows, expected %d" % (runs, WORKERS))
    print("html: %d rows in the DOM and the screenshot, no console output" % WORKERS)


if __name__ == "__main__":
    main()
