#!/bin/bash
# rotate-backups.sh SOURCE_DIR BACKUP_DIR KEEP
# Archive SOURCE_DIR to BACKUP_DIR/<name>-<stamp>.tar.gz, then keep only the KEEP newest archives of
# that source. <stamp> is $BACKUP_STAMP when set, otherwise the current time as YYYYmmddHHMMSS.

src=$1
dest=$2
keep=$3

name=$(basename $src)
stamp=${BACKUP_STAMP:-$(date +%Y%m%d%H%M%S)}

mkdir -p $dest
tar -czf $dest/$name-$stamp.tar.gz -C $(dirname $src) $name

cd $dest
for old in $(ls -t *.tar.gz | tail -n +$keep); do
    rm $old
done
echo "backed up $src to $dest/$name-$stamp.tar.gz"
