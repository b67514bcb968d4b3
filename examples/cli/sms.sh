#!/usr/bin/env bash
# slidewin from the shell with redis-cli.
#   examples/cli/sms.sh [port]     (a server with the module; default 6379)
set -euo pipefail
cli=(redis-cli -p "${1:-6379}")

echo "# 5 SMS codes per minute per IP: the 6th is refused"
for _ in 1 2 3 4 5 6; do "${cli[@]}" SLIDEWIN.CHECK sms:limit:192.0.2.1 5 60000; done

echo "# DETAIL: allowed, limit, remaining, retry_after_ms, reset_after_ms"
"${cli[@]}" SLIDEWIN.CHECK sms:limit:192.0.2.1 5 60000 DETAIL | tr '\n' ' '; echo

echo "# A dry run that changes nothing"
"${cli[@]}" SLIDEWIN.PEEK sms:limit:192.0.2.2 5 60000 | tr '\n' ' '; echo

echo "# Codes to one phone: from this IP 5/min, in all 1/min and 10/day; all or nothing."
echo "# The hash tag {phone} keeps the keys in one cluster slot."
"${cli[@]}" SLIDEWIN.MCHECK 3 'sms:{+8613800000000}:ip:192.0.2.3' 5 60000 \
  'sms:{+8613800000000}:phone' 1 60000 'sms:{+8613800000000}:phone' 10 86400000
"${cli[@]}" SLIDEWIN.MCHECK 3 'sms:{+8613800000000}:ip:192.0.2.3' 5 60000 \
  'sms:{+8613800000000}:phone' 1 60000 'sms:{+8613800000000}:phone' 10 86400000
