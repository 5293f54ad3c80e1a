#!/usr/bin/env bash
# make conformance: the differential tests against a real RabbitMQ.
#
# The broker is, in order: $XROUTE_AMQP_URL; one answering on 127.0.0.1:5672 (guest/guest);
# else a private node that this script starts on loopback (installing Debian's rabbitmq-server
# if it is absent) and stops again when the tests end, whatever their outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

amqp_answers() {  # host port -> exit 0 if an AMQP 0-9-1 broker answers there
    "$PY" - "$1" "$2" <<'PY'
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        sys.exit(0 if s.recv(8)[:1] == b"\x01" else 1)  # a connection.start frame
except OSError:
    sys.exit(1)
PY
}

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

started_pid=""
workdir=""
node=""
stop_private_broker() {
    if [ -n "$started_pid" ]; then
        echo "conformance: stopping the private broker $node (pid $started_pid)"
        rabbitmqctl -n "$node" stop >/dev/null 2>&1 || kill "$started_pid" 2>/dev/null || true
        for _ in $(seq 1 30); do kill -0 "$started_pid" 2>/dev/null || break; sleep 1; done
        kill -9 "$started_pid" 2>/dev/null || true
    fi
    [ -n "$workdir" ] && rm -rf "$workdir"
    return 0
}
trap stop_private_broker EXIT

start_private_broker() {
    if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/sbin/rabbitmq-server ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "conformance: no RabbitMQ found; run 'sudo apt-get install rabbitmq-server' or set XROUTE_AMQP_URL" >&2
            exit 1
        fi
        echo "conformance: installing rabbitmq-server from Debian"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
        # Debian's package may start a broker of its own; this script uses a private node.
    fi
    export PATH="$PATH:/usr/sbin:/usr/lib/rabbitmq/bin"
    local port dist
    port=5672
    if (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then port=$(free_port); fi  # 5672 is taken
    dist=$(free_port)
    workdir=$(mktemp -d /tmp/xroute-rabbitmq.XXXXXX)
    node="xroute-conformance-$$@localhost"
    cat > "$workdir/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:$port
loopback_users = none
log.console = false
log.file.level = warning
CONF
    echo "[]." > "$workdir/enabled_plugins"
    mkdir -p "$workdir/mnesia" "$workdir/log"
    # Debian's wrapper runs the broker as the 'rabbitmq' user when started by root.
    if [ "$(id -u)" = 0 ] && id rabbitmq >/dev/null 2>&1; then
        chown -R rabbitmq: "$workdir"
    fi
    echo "conformance: starting a private RabbitMQ node $node on 127.0.0.1:$port"
    RABBITMQ_NODENAME="$node" \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$port" \
    RABBITMQ_DIST_PORT="$dist" \
    RABBITMQ_CONFIG_FILE="$workdir/rabbitmq" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$workdir/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$workdir/mnesia" \
    RABBITMQ_LOG_BASE="$workdir/log" \
    RABBITMQ_FEATURE_FLAGS_FILE="$workdir/feature_flags" \
    RABBITMQ_PID_FILE="$workdir/pid" \
    ERL_CRASH_DUMP="$workdir/erl_crash.dump" \
    RABBITMQ_SERVER_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    ERL_EPMD_ADDRESS=127.0.0.1 \
        rabbitmq-server > "$workdir/server.out" 2>&1 &
    started_pid=$!
    for _ in $(seq 1 90); do
        if amqp_answers 127.0.0.1 "$port"; then
            export XROUTE_AMQP_URL="amqp://guest:guest@127.0.0.1:$port/%2F"
            return 0
        fi
        if ! kill -0 "$started_pid" 2>/dev/null; then break; fi
        sleep 1
    done
    echo "conformance: the private broker did not start; its output:" >&2
    tail -n 40 "$workdir/server.out" >&2 || true
    exit 1
}

if [ -n "${XROUTE_AMQP_URL:-}" ]; then
    echo "conformance: using XROUTE_AMQP_URL"
elif [ -z "${XROUTE_CONFORMANCE_PRIVATE:-}" ] && amqp_answers 127.0.0.1 5672; then
    export XROUTE_AMQP_URL="amqp://guest:guest@127.0.0.1:5672/%2F"
    echo "conformance: using the broker on 127.0.0.1:5672"
else
    start_private_broker
fi
"$PY" -m pytest -m conformance tests/conformance -p no:cacheprovider
