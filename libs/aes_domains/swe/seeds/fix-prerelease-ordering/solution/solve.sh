#!/bin/bash
# Replace the string-join key with SemVer's precedence: a release's key sorts after any
# pre-release of it, and each identifier is (0, number) or (1, text) so numbers sort
# numerically and before words; tuples already rank a shorter prefix lower.
set -euo pipefail
cd /app/repo
python3 - <<'PY'
from pathlib import Path

p = Path("vercmp/version.py")
src = p.read_text()
old = '        return (self.major, self.minor, self.patch, ".".join(map(str, self.prerelease)))\n'
new = ('        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.prerelease)\n'
       '        return (self.major, self.minor, self.patch, not self.prerelease, pre)\n')
assert src.count(old) == 1, "_key's body is not the expected one"
p.write_text(src.replace(old, new))
PY
python3 -m pytest -q -p no:cacheprovider tests
