#!/usr/bin/env bash
set -u
/tmp/hc/measure.sh /tmp/hc/C3 3 /tmp/hc/C > /tmp/hc/C3.log 2>&1
/tmp/hc/measure.sh /tmp/hc/A4 3 /tmp/hc/A > /tmp/hc/A4.log 2>&1
echo ALLDONE > /tmp/hc/ab3.done
