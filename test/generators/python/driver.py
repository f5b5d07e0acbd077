"""The Python generator of examples/python under test/generators/check.py's
control, with node/driver.js's commands and replies."""
import os
import sys
import time

sys.path.insert(0, os.environ["GENERATOR_PY_DIR"])
import snowflake  # noqa: E402

behind = 0
snowflake.wall_ms = lambda: time.time_ns() // 1_000_000 - behind


def say(line):
    print(line, flush=True)


try:
    gen = snowflake.Snowflake(os.environ["APP_URL"], name=os.environ["GEN_NAME"],
                              ttl=float(os.environ["GEN_TTL"]),
                              max_backward=float(os.environ.get("GEN_MAX_BACKWARD", 1)),
                              max_workers=(int(os.environ["GEN_MAX_WORKERS"])
                                           if "GEN_MAX_WORKERS" in os.environ else None))
except Exception as e:
    say(f"error {e}")
    sys.exit(1)
say(f"lease {gen.datacenter_id} {gen.worker_id} {gen.token} {gen.holder}")
def commands():
    try:
        yield from sys.stdin
    except KeyboardInterrupt:          # SIGINT, once the lease is released
        sys.exit(130)


for line in commands():
    cmd, *args = line.split()
    try:
        if cmd == "gen":
            # The IDs made before an error are written too.
            ids, error = [], None
            try:
                for _ in range(int(args[0])):
                    ids.append(gen.next())
            except Exception as e:
                error = e
            with open(args[1], "w") as f:
                f.write("".join(f"{i}\n" for i in ids))
            say(f"error {error}" if error else "done")
        elif cmd == "try":
            say(f"ok {gen.next(int(args[0]))}")
        elif cmd == "clock":
            behind = int(args[0])
            say(f"clock {behind}")
        elif cmd == "close":
            say(f"closed {str(gen.close()).lower()}")
            break
    except Exception as e:
        say(f"error {e}")
else:
    gen.close()        # no more commands: release the lease and end
