#!/usr/bin/env bash
set -u
/tmp/hc/measure.sh /tmp/hc/B1 3 /tmp/hc/B > /tmp/hc/B1.log 2>&1
/tmp/hc/measure.sh /tmp/hc/A2 3 /tmp/hc/A > /tmp/hc/A2.log 2>&1
/tmp/hc/measure.sh /tmp/hc/B2 3 /tmp/hc/B > /tmp/hc/B2.log 2>&1
echo ALLDONE > /tmp/hc/ab.done
