#!/bin/bash
set -e
printf 'hello, world\n' > /app/greeting.txt
wc -l < /app/input.txt > /app/count.txt
