#!/bin/bash
echo two >> /srv/log.txt
