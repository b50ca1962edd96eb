"""Browser use: the task is a small local web application, and the agent changes its state
only through a headless browser (``browse``), as a non-root user; the tests read the state
the application saved.

The image (``aes-browser:latest``) adds Chromium, chromedriver, selenium and two commands:
``aes-web-up`` (the startup: runs the task's ``/srv/web/app.py`` as root on 127.0.0.1:8000)
and ``browse`` (the agent's browser).
"""

from pathlib import Path

from aes_lib.domains.base import Domain

APP_DIR = "/srv/web"
"""The application's folder: its code and saved state, root's alone."""
APP_PATH = f"{APP_DIR}/app.py"
"""Where a task's Dockerfile installs its web application (``aes-web-up``'s default)."""
APP_URL = "http://127.0.0.1:8000/"
"""Where the application listens (loopback: containers have no network)."""

SOLVER_PROMPT = f"""This task is a web application running at {APP_URL} in your container. Use it the way a
person would, through the `browse` command (a headless Chromium browser); you cannot change its data any
other way. Each call opens a fresh browser at a URL, runs the actions you give in order, then prints the
final URL, title, visible text, and the page's links, buttons and form fields, each with a CSS selector
to use in your next call:

```bash
browse {APP_URL}cases --fill '#q=QZ-418' --click '#search' --click 'a.case'
```

Actions: --fill 'SELECTOR=TEXT' (replace a text field's content), --select 'SELECTOR=OPTION' (by visible
text or value), --check SELECTOR / --uncheck SELECTOR (checkboxes, radios), --click SELECTOR (links,
buttons; waits for the next page), --wait SELECTOR. Add --text to see up to 20000 characters of text
instead of 2000. Nothing carries over between calls (no open page, no unsaved input): fill a form and
submit it in the same call. Exit status 3 means an action failed (e.g. no element matched a selector);
the error says which, and the page it stopped on is still printed. Read the page after saving: the
application reports validation errors there."""

DOMAIN = Domain(
    name="browser",
    title="Browser use",
    root=Path(__file__).parent,
    gate="aes_domains.browser.gate:BrowserGate",
    solver_prompt=SOLVER_PROMPT,
    startup="aes-web-up",
    results=(APP_DIR,),
)
