#!/bin/sh
exec /work/bins-s50a/ramqp-brokerd --worker-threads 1 "$@"
