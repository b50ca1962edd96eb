#!/bin/bash
mkdir -p /srv && echo "hello, harbor" > /srv/greeting
