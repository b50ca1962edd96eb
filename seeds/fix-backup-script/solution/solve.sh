#!/bin/bash
# Quote every expansion, validate arguments, fail fast, and rotate by the stamp in the name of this source only.
set -euo pipefail
cat > /app/bin/rotate-backups.sh <<'SH'
#!/bin/bash
# rotate-backups.sh SOURCE_DIR BACKUP_DIR KEEP
# Archive SOURCE_DIR to BACKUP_DIR/<name>-<stamp>.tar.gz, then keep only the KEEP newest archives of
# that source. <stamp> is $BACKUP_STAMP when set, otherwise the current time as YYYYmmddHHMMSS.
set -euo pipefail

usage() { echo "usage: $0 SOURCE_DIR BACKUP_DIR KEEP" >&2; exit 2; }
[ $# -eq 3 ] || usage
src=${1%/}
dest=$2
keep=$3
[[ $keep =~ ^[1-9][0-9]*$ ]] || usage
[ -d "$src" ] || { echo "not a directory: $src" >&2; exit 1; }

name=$(basename "$src")
stamp=${BACKUP_STAMP:-$(date +%Y%m%d%H%M%S)}

mkdir -p "$dest"
tar -czf "$dest/$name-$stamp.tar.gz" -C "$(dirname "$src")" "$name"

# Stamps are fixed-width digits, so a reverse name sort is newest first.
mapfile -t archives < <(find "$dest" -maxdepth 1 -type f -name "$name-[0-9]*.tar.gz" -printf '%f\n' | sort -r)
for old in "${archives[@]:keep}"; do
    rm -f -- "$dest/$old"
done
echo "backed up $src to $dest/$name-$stamp.tar.gz"
SH
