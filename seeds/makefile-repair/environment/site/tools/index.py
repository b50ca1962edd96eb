"""index.py OUT.html PAGE.md...: a list of links to every page, titled by its first heading."""

import html
import os
import sys

out, pages = sys.argv[1], sorted(sys.argv[2:])
items = []
for page in pages:
    title = open(page).readline().lstrip("# ").strip()
    name = os.path.splitext(os.path.basename(page))[0] + ".html"
    items.append(f'<li><a href="{name}">{html.escape(title)}</a></li>')
open(out, "w").write("<!doctype html>\n<ul>\n" + "\n".join(items) + "\n</ul>\n")
