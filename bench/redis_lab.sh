# Sourced by the bench scripts that run one accelerated redis-server in a lab of their own
# (observe_cost.sh, soak.sh). They set PH (the pronghorn binary), PREFIX (the lab), WORK (a
# scratch directory, removed on exit) and SERVER (the server's pid, once started).

# On exit: the server stopped, the lab down, the scratch directory gone.
redis_lab_cleanup() {
    if [[ -n ${SERVER:-} ]]; then
        kill "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    fi
    "$PH" lab down --prefix "$PREFIX" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}

# Waits (10 s at most) until the redis-server at 10.99.0.1 answers PING from side b, then prints
# the accelerated process's pid. $1 names the calling script in errors.
redis_lab_ready() {
    for _ in $(seq 100); do
        "$PH" lab exec --prefix "$PREFIX" b -- redis-cli -h 10.99.0.1 ping 2>/dev/null | grep -q PONG && break
        sleep 0.1
    done
    "$PH" lab exec --prefix "$PREFIX" b -- redis-cli -h 10.99.0.1 ping | grep -q PONG ||
        { echo "$1: redis-server did not answer: $(tail -3 "$WORK/server.log")" >&2; return 1; }
    "$PH" ps --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["pid"])'
}
