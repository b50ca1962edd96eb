#!/bin/bash
# Rewrite the Makefile with the right pattern rule, real prerequisites, tab-indented recipes and .PHONY.
set -euo pipefail
cd /app/site
cat > Makefile <<'MK'
# Build the static site: build/<page>.html for every src/pages/<page>.md, build/index.html, dist/site.tar.gz.
PAGES := $(wildcard src/pages/*.md)
HTML := $(patsubst src/pages/%.md,build/%.html,$(PAGES))
TEMPLATE := templates/page.html

.PHONY: all clean

all: dist/site.tar.gz

build/%.html: src/pages/%.md $(TEMPLATE) tools/render.py
	@mkdir -p build
	python3 tools/render.py $< $(TEMPLATE) $@

build/index.html: $(PAGES) tools/index.py
	@mkdir -p build
	python3 tools/index.py $@ $(PAGES)

dist/site.tar.gz: $(HTML) build/index.html
	@mkdir -p dist
	tar -czf $@ -C build .

clean:
	rm -rf build dist
MK
make
