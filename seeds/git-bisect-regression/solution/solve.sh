#!/bin/bash
# Bisect on the slugify behaviour itself (the repo's test file changed over time), then fix on top.
set -euo pipefail
cd /app/repo
git config user.name "Oracle" && git config user.email "oracle@example.com"
cat > /tmp/slug_ok.sh <<'SH'
#!/bin/bash
cd /app/repo && python3 -c 'import textutils, sys; sys.exit(textutils.slugify("Hello, World!") != "hello-world")'
SH
chmod +x /tmp/slug_ok.sh
git bisect start main "$(git rev-list --max-parents=0 main)"
git bisect run /tmp/slug_ok.sh > /tmp/bisect.log
git rev-parse refs/bisect/bad > /app/first_bad.txt
git bisect reset >> /tmp/bisect.log
sed -i 's/re.compile(r"\[^a-z0-9\]")/re.compile(r"[^a-z0-9]+")/' textutils.py
python3 -m pytest -q -p no:cacheprovider tests
git commit -q -am "slugify: collapse runs of separators again"
