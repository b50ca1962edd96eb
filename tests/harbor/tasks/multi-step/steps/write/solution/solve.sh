#!/bin/bash
mkdir -p /srv && echo one > /srv/log.txt
