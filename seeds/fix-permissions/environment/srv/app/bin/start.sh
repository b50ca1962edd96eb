#!/bin/sh
echo "starting app"
