#!/bin/sh
echo "stopping app"
