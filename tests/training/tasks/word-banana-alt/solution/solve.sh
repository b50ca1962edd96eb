#!/bin/bash
echo banana > /app/answer.txt
