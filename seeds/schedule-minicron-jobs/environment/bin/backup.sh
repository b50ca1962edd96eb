#!/bin/sh
echo "backup ran at $(date)" >> /var/log/backup.log
