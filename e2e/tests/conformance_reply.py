"""A conformance case's task step, run as a script step in a Job.

The cluster conformance test (conformance_runs.rs) turns every agent,
script, http and message step of a case into a script step running this
program. It reads the step's inputs from $INPUTS (the script contract: an
object as itself, anything else as {"data": v}), asks the test's reply
server (REPLY_URL; pods share the host network on the stand-in node) for
the case's next scripted reply for this step (and part), and prints it:
stdout and exit code as the server says, so a scripted failure is a
script that fails.
"""
import json
import os
import sys
import urllib.request


def inputs():
    found = {}
    folder = os.environ.get("INPUTS", "")
    if not os.path.isdir(folder):
        return found
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            value = json.load(f)
        if isinstance(value, dict) and list(value) == ["data"]:
            value = value["data"]
        found[name] = value
    return found


def main():
    body = json.dumps({
        "step": os.environ.get("STEP_KEY", ""),
        "part": os.environ.get("PART_KEY", ""),
        "attempt": os.environ.get("ATTEMPT", ""),
        "input": inputs(),
    }).encode()
    request = urllib.request.Request(
        os.environ["REPLY_URL"], data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        reply = json.load(response)
    sys.stdout.write(reply.get("stdout", ""))
    sys.stderr.write(reply.get("stderr", ""))
    sys.exit(int(reply.get("exit", 0)))


main()
