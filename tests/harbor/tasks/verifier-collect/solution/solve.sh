#!/bin/bash
mkdir -p /srv/queue && touch /srv/queue/a /srv/queue/b /srv/queue/c
