#!/bin/sh
echo "report ran at $(date)" >> /var/log/report.log
