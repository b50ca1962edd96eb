@echo off
if exist C:\app\done.txt (echo 1 > C:\logs\verifier\reward.txt) else (echo 0 > C:\logs\verifier\reward.txt)
