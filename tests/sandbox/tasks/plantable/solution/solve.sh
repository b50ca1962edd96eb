#!/bin/bash
printf 'def add(a, b):\n    return a + b\n' > /app/calc.py
