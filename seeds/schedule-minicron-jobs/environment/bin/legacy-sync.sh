#!/bin/sh
echo "legacy-sync ran at $(date)" >> /var/log/legacy-sync.log
