#!/usr/bin/env python3
"""Checks a page of `udamon report html` in a real browser.

    check_html.py REPORT.html SCREENSHOT.png

Opens REPORT.html (a file:// URL: the page must need no network) in
Debian's chromium, headless, through /usr/bin/chromedriver (selenium from
the virtualenv tests/browser-venv makes), in a 1400x1000 window, and checks
that the heatmap canvas is drawn (pixels of many colours), that moving the
mouse over it shows the readout of the cell under the pointer, that a mouse
wheel over it zooms the time axis (its labels change), shift+wheel the
address axis, a drag pans and the reset button restores the view, that the
working-set chart is drawn and the hot table has rows (and the scheme charts
are drawn when the page has them), that picking a process in the process
picker (when the page has one) redraws the heatmap, its axes and the
working-set chart, and that the browser logged no error.
Saves a screenshot of the whole page, with the readout showing, to
SCREENSHOT.png. Exits 1
naming the first check that failed, 2 on bad usage.

UDAMON_CHROMIUM and UDAMON_CHROMEDRIVER override the two binaries' paths.
"""

import os
import pathlib
import re
import sys

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.support.ui import Select
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

# Colours counted over a canvas, every 97th pixel: a drawn heatmap or chart
# has many; a blank or one-colour canvas has one or two.
DISTINCT = """
const c = document.getElementById(arguments[0]);
if (!c) return null;
const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
const seen = new Set();
for (let i = 0; i < d.length; i += 4 * 97) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
return [c.width, c.height, seen.size];
"""

# A hot pixel of a canvas, in CSS pixels: of the pixels within 10% of the
# most yellow (viridis goes from dark purple to yellow, so red + green grows
# with the heat; blue leaves out the white gap lines and grey cells), the
# one nearest the middle.
HOTTEST = """
const c = document.getElementById(arguments[0]);
const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let best = 0;
const heat = (i) => (d[i + 2] < 150 ? d[i] + d[i + 1] : 0);
for (let i = 0; i < d.length; i += 4) best = Math.max(best, heat(i));
let at = 0, near = Infinity;
for (let i = 0; i < d.length; i += 4) {
  if (heat(i) < 0.9 * best) continue;
  const p = i / 4, x = p % c.width - c.width / 2, y = Math.floor(p / c.width) - c.height / 2;
  if (x * x + y * y < near) { near = x * x + y * y; at = p; }
}
const k = c.width / c.getBoundingClientRect().width;
return [(at % c.width + 0.5) / k, (Math.floor(at / c.width) + 0.5) / k];
"""


def fail(msg):
    print(f"check_html: {msg}", file=sys.stderr)
    sys.exit(1)


def labels(driver, axis):
    return [s.text for s in driver.find_elements(By.CSS_SELECTOR, f"#{axis} span")]


def drawn(driver, canvas, least):
    got = driver.execute_script(DISTINCT, canvas)
    if got is None:
        fail(f"the page has no #{canvas} canvas")
    w, h, colours = got
    if w < 100 or h < 100 or colours < least:
        fail(f"#{canvas} is not drawn: {w}x{h} pixels of {colours} colours (expected at least {least})")
    return colours


def changed(driver, axis, before, what):
    try:
        WebDriverWait(driver, 5).until(lambda d: labels(d, axis) != before)
    except TimeoutException:
        fail(f"{what} did not change the labels of #{axis}: {before}")
    return labels(driver, axis)


def check_picker(driver):
    """Picks each process of the page's process picker (if it has one), then
    "all processes" again: each redraws the heatmap and the working-set
    chart. Returns how many processes were picked."""
    found = driver.find_elements(By.ID, "process")
    if not found:
        return 0
    pick = Select(found[0])
    values = [o.get_attribute("value") for o in pick.options]
    if len(values) < 3 or values[0] != "":
        fail(f"the process picker lists {values}, expected all processes and two or more")
    for v in values[1:] + [""]:
        pick.select_by_value(v)
        try:
            WebDriverWait(driver, 5).until(
                lambda d: d.execute_script("return document.body.dataset.process") == v)
        except TimeoutException:
            fail(f"picking process {v!r} did not redraw the page")
        drawn(driver, "heatmap", 2)
        drawn(driver, "wss", 2)
        if not labels(driver, "time-axis"):
            fail(f"process {v!r}: the heatmap has no time axis")
    return len(values) - 1


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    report = pathlib.Path(sys.argv[1]).resolve()
    shot = pathlib.Path(sys.argv[2])
    if not report.is_file():
        fail(f"{report}: no such file")

    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("UDAMON_CHROMIUM", "/usr/bin/chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1400,1000", "--hide-scrollbars", "--force-device-scale-factor=1"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ.get("UDAMON_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=opts)
    try:
        driver.set_window_size(1400, 1000)
        driver.get(report.as_uri())
        try:
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
        except TimeoutException:
            fail("the page's script did not finish drawing within 30 s")

        heat = drawn(driver, "heatmap", 8)
        canvas = driver.find_element(By.ID, "heatmap")

        # Hover over the hottest pixel drawn: the readout of that cell must
        # show an access frequency above 0.
        x, y = driver.execute_script(HOTTEST, "heatmap")
        rect = canvas.rect
        ActionChains(driver).move_to_element_with_offset(
            canvas, int(x - rect["width"] / 2), int(y - rect["height"] / 2)).perform()
        readout = driver.find_element(By.ID, "readout")
        try:
            WebDriverWait(driver, 5).until(lambda d: readout.is_displayed())
        except TimeoutException:
            fail("moving the mouse over the heatmap showed no readout")
        text = readout.text
        for word in ("time", "addresses", "size", "frequency", "mean age"):
            if word not in text:
                fail(f"the readout lacks {word!r}: {text!r}")
        freq = re.search(r"([0-9.]+)% of samples", text)
        if not freq or float(freq.group(1)) <= 0:
            fail(f"the readout over the hottest pixel shows no access: {text!r}")

        wss = drawn(driver, "wss", 3)
        hot_rows = len(driver.find_elements(By.CSS_SELECTOR, "#hot tbody tr"))
        if hot_rows == 0:
            fail("the hot table has no rows")
        schemes = driver.find_elements(By.ID, "scheme-applied")
        if schemes:
            drawn(driver, "scheme-applied", 3)
        # The whole page in one image: the window as tall as the page.
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1400, max(1000, height + 20))
        driver.save_screenshot(str(shot))
        driver.set_window_size(1400, 1000)

        # Zoom and pan.
        t0, a0 = labels(driver, "time-axis"), labels(driver, "addr-axis")
        ActionChains(driver).scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -400).perform()
        t1 = changed(driver, "time-axis", t0, "a mouse wheel over the heatmap")
        ActionChains(driver).key_down(Keys.SHIFT).scroll_from_origin(
            ScrollOrigin.from_element(canvas), 0, -400).key_up(Keys.SHIFT).perform()
        changed(driver, "addr-axis", a0, "shift+wheel over the heatmap")
        ActionChains(driver).move_to_element(canvas).click_and_hold().move_by_offset(
            -200, 0).release().perform()
        changed(driver, "time-axis", t1, "dragging the heatmap")
        driver.find_element(By.ID, "reset").click()
        try:
            WebDriverWait(driver, 5).until(lambda d: labels(d, "time-axis") == t0)
        except TimeoutException:
            fail(f"reset did not restore the time axis: {labels(driver, 'time-axis')} != {t0}")

        picked = check_picker(driver)

        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        if errors:
            fail("the browser logged errors: " + "; ".join(e.get("message", "") for e in errors))
        print(f"check_html: ok: heatmap of {heat} colours, readout {' '.join(text.split())!r}, wss chart of {wss} "
              f"colours, {hot_rows} hot rows{', scheme charts' if schemes else ''}"
              f"{f', {picked} processes picked' if picked else ''}; zoom, pan "
              f"and reset change the axes; no browser errors; screenshot {shot}")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
