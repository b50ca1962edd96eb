#!/bin/sh
echo "cleanup ran at $(date)" >> /var/log/cleanup.log
