@echo off
echo done > C:\app\done.txt
