#!/bin/bash
mkdir -p /srv && echo "maintenance at 02:00 UTC" > /srv/motd
