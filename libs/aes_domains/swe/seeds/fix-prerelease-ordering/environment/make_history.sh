#!/bin/bash
# Commit the repository in the steps it grew by, with fixed names and dates, so every
# build of this image has the same history and commit ids.
set -euo pipefail
export GIT_AUTHOR_NAME="Jonas Aberg" GIT_AUTHOR_EMAIL="jonas@vercmp.dev"
export GIT_COMMITTER_NAME="Jonas Aberg" GIT_COMMITTER_EMAIL="jonas@vercmp.dev"
commit() {
  local when=$1 message=$2; shift 2
  git add -- "$@"
  GIT_AUTHOR_DATE=$when GIT_COMMITTER_DATE=$when git commit -q -m "$message"
}
git init -q -b main .
commit "2023-10-02T08:30:00+00:00" "Project skeleton" README.md pyproject.toml .gitignore
commit "2023-10-02T10:12:00+00:00" "Version parsing and precedence" vercmp/__init__.py vercmp/version.py
commit "2023-10-04T14:47:00+00:00" "Tests for parsing and release ordering" tests/test_version.py
test -z "$(git status --porcelain --untracked-files=all)"
