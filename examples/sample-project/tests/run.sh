#!/bin/sh
# Checks the Python summary without any test framework.
set -e
cd "$(dirname "$0")/.."
sample="${TMPDIR:-/tmp}/wordcount-sample.txt"
printf "one two\nthree\n" > "$sample"
python3 src/summary.py "$sample" | grep -q "'words': 3"
echo ok