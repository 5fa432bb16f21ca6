"""Cold-start proxy: time from process start to the first poll of the Lambda
runtime API, and resident memory after one invocation, for each function's
release `bootstrap`, against a local runtime API stub on 127.0.0.1.

usage: coldstart.py RUNS FUNCTION=BOOTSTRAP:EVENT_FILE ...
Needs the loopback AWS environment (run through infra/local/with-local.sh) and
the function's environment (TABLE_NAME, EVENT_BUS_NAME) exported.
"""
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Run:
    def __init__(self, event):
        self.event = event
        self.first_poll = threading.Event()
        self.first_poll_at = None
        self.done = threading.Event()
        self.served = False
        self.error = None


def make_handler(run):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if not self.path.endswith("/runtime/invocation/next"):
                self.send_error(404)
                return
            if not run.first_poll.is_set():
                run.first_poll_at = time.perf_counter()
                run.first_poll.set()
            if run.served:
                # The second poll: hold it until the measurement ends (the
                # process is then killed, so the answer may find no reader).
                run.done.wait(30)
                try:
                    self.send_error(503)
                except OSError:
                    pass
                return
            run.served = True
            body = run.event.encode()
            self.send_response(200)
            self.send_header("Lambda-Runtime-Aws-Request-Id", "bench-1")
            self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 60_000))
            self.send_header("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:bench")
            self.send_header("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            payload = self.rfile.read(length)
            if "/error" in self.path:
                run.error = payload.decode(errors="replace")
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            run.done.set()

    return Handler


def measure(bootstrap, event):
    run = Run(event)
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), make_handler(run))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{port}", AWS_LAMBDA_FUNCTION_NAME="bench",
               AWS_LAMBDA_FUNCTION_MEMORY_SIZE="256", AWS_LAMBDA_FUNCTION_VERSION="$LATEST", RUST_LOG="error")
    start = time.perf_counter()
    proc = subprocess.Popen([bootstrap], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not run.first_poll.wait(30):
            raise RuntimeError(f"{bootstrap} never polled the runtime API")
        init_ms = (run.first_poll_at - start) * 1000
        if not run.done.wait(30):
            raise RuntimeError(f"{bootstrap} never answered")
        with open(f"/proc/{proc.pid}/status") as f:
            rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return init_ms, rss_kb / 1024, run.error
    finally:
        proc.kill()
        proc.wait()
        run.done.set()
        server.shutdown()


def main():
    runs = int(sys.argv[1])
    print("| function | init to first poll, median of %d (ms) | min–max (ms) | RSS after one invocation (MiB) |" % runs)
    print("|---|---|---|---|")
    for spec in sys.argv[2:]:
        name, rest = spec.split("=", 1)
        bootstrap, event_file = rest.split(":", 1)
        with open(event_file) as f:
            event = f.read()
        samples, rss, errors = [], [], set()
        for _ in range(runs):
            init_ms, rss_mb, error = measure(bootstrap, event)
            samples.append(init_ms)
            rss.append(rss_mb)
            if error:
                errors.add(json.loads(error).get("errorType", "error"))
        note = f" (function error: {', '.join(sorted(errors))})" if errors else ""
        print(f"| {name} | {statistics.median(samples):.1f} | {min(samples):.1f}–{max(samples):.1f} | {statistics.median(rss):.1f}{note} |")


if __name__ == "__main__":
    main()
