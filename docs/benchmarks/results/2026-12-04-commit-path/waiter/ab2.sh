#!/usr/bin/env bash
set -u
/tmp/hc/measure.sh /tmp/hc/C1 3 /tmp/hc/C > /tmp/hc/C1.log 2>&1
/tmp/hc/measure.sh /tmp/hc/A3 3 /tmp/hc/A > /tmp/hc/A3.log 2>&1
/tmp/hc/measure.sh /tmp/hc/C2 3 /tmp/hc/C > /tmp/hc/C2.log 2>&1
echo ALLDONE > /tmp/hc/ab2.done
