"""render.py SRC.md TEMPLATE OUT.html: '# ' lines become <h1>, blank-line separated blocks become <p>."""

import html
import sys

src, template, out = sys.argv[1:4]
blocks = [b.strip() for b in open(src).read().split("\n\n") if b.strip()]
title = blocks[0].lstrip("# ").strip()
parts = [f"<h1>{html.escape(title)}</h1>"] + [f"<p>{html.escape(b)}</p>" for b in blocks[1:]]
page = open(template).read().replace("{title}", html.escape(title)).replace("{body}", "\n".join(parts))
open(out, "w").write(page)
