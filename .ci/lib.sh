# Shared by the .ci scripts that start a test server (minio.sh, bind.sh): sourced, not run.

# port_free PORT: nothing accepts TCP connections on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_ready PID TENTHS CHECK...: runs CHECK every 0.1 s, up to TENTHS times, while PID
# lives. Returns 0 once CHECK succeeds, 1 when PID has exited, 2 when time ran out.
# Under `set -e`, call it as `rc=0; wait_ready … || rc=$?`.
wait_ready() {
	local pid=$1 tries=$2
	shift 2
	for _ in $(seq 1 "$tries"); do
		kill -0 "$pid" 2>/dev/null || return 1
		"$@" && return 0
		sleep 0.1
	done
	return 2
}

# stop_pid PID: SIGTERM, up to 10 s for it to exit, then SIGKILL. Only a PID this
# script's `start` printed is ever passed here.
stop_pid() {
	local pid=$1
	if kill "$pid" 2>/dev/null; then
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
}
