#!/bin/sh
# Runs the examples against the local lab servers (kinesalite, dynalite):
#   examples/multilang/run-lab.sh [python|node] [SECONDS]
# Creates a stream, produces 200 records, runs `kncat multilang` with the
# chosen processor for SECONDS (default 15), then stops it with SIGTERM.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
which=${1:-python}
secs=${2:-15}
kncat=${KNCAT:-$top/build/kncat}
if [ "${KN_IN_LAB:-}" != 1 ]; then
  exec env KN_IN_LAB=1 python3 "$top/tests/lab/lab.py" run --kinesalite --dynalite \
    -- "$0" "$which" "$secs"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case "$which" in
  node) exe="node $here/processor.js"; export NODE_PATH="$top/tests/lab/node_modules" ;;
  *) exe="python3 $here/processor.py" ;;
esac
sed -e "s|^executableName.*|executableName = $exe|" \
    -e "s|^regionName.*|regionName = ${AWS_REGION:-us-east-1}|" \
    "$here/sample.properties" > "$work/app.properties"
"$kncat" create clicks --shards 2
seq 1 200 | "$kncat" produce clicks
cd "$work"
"$kncat" -X lease.take.interval.ms=1000 multilang "$work/app.properties" &
pid=$!
sleep "$secs"
kill -TERM "$pid"
wait "$pid"
echo "run-lab.sh: kncat multilang exited $?"
