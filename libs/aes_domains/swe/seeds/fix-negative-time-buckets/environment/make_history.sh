#!/bin/bash
# Commit the repository in the steps it grew by, with fixed names and dates, so every
# build of this image has the same history and commit ids.
set -euo pipefail
export GIT_AUTHOR_NAME="Mara Lind" GIT_AUTHOR_EMAIL="mara@tsbucket.dev"
export GIT_COMMITTER_NAME="Mara Lind" GIT_COMMITTER_EMAIL="mara@tsbucket.dev"
commit() {
  local when=$1 message=$2; shift 2
  git add -- "$@"
  GIT_AUTHOR_DATE=$when GIT_COMMITTER_DATE=$when git commit -q -m "$message"
}
git init -q -b main .
commit "2024-02-12T09:14:00+00:00" "Project skeleton" README.md pyproject.toml .gitignore
commit "2024-02-12T11:40:00+00:00" "bucket_start, bucket_range and width parsing" tsbucket/__init__.py tsbucket/windows.py
commit "2024-02-13T16:05:00+00:00" "Tests for windows and parse_width" tests/test_windows.py
test -z "$(git status --porcelain --untracked-files=all)"
