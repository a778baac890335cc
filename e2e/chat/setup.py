"""Users and the shared room on the e2e Synapse, then the env file the tests read.

Run by e2e/chat/up once Synapse answers, on every up: each step checks first
and makes only what is missing, so a kept database (up after down) reuses the
users, their access tokens and the room. Standard library only.

Users: coxswain (the bot the controller acts as), alice (allowed to run
commands in tests) and bob (not). Room: #review:localhost, created by alice
(public_chat), bob invited and joined, the bot invited (the controller joins
by itself).
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

SERVER_NAME = "localhost"
USERS = ["coxswain", "alice", "bob"]
ROOM_ALIAS_NAME = "review"


class MatrixError(Exception):
    """A request the homeserver refused: method, path, status and its errcode."""

    def __init__(self, method, path, status, body):
        self.status = status
        self.body = body
        self.errcode = body.get("errcode") if isinstance(body, dict) else None
        super().__init__(f"{method} {path}: HTTP {status}: {body}")


class Client:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def call(self, method, path, token=None, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            raise MatrixError(method, path, e.code, parsed) from None


def user_id(name):
    return f"@{name}:{SERVER_NAME}"


def password(name):
    # A local test server on 127.0.0.1: fixed passwords are fine and let a
    # kept database log the users in again.
    return f"{name}-e2e-password"


def register(client, secret, name):
    """Admin register API (shared secret); an existing user is left alone."""
    path = "/_synapse/admin/v1/register"
    nonce = client.call("GET", path)["nonce"]
    signed = "\x00".join([nonce, name, password(name), "notadmin"]).encode()
    mac = hmac.new(secret.encode(), signed, hashlib.sha1)
    body = {
        "nonce": nonce,
        "username": name,
        "password": password(name),
        "admin": False,
        "mac": mac.hexdigest(),
    }
    try:
        client.call("POST", path, body=body)
        print(f"registered {user_id(name)}", file=sys.stderr)
    except MatrixError as e:
        if e.errcode != "M_USER_IN_USE":
            raise


def login(client, name):
    body = {
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": name},
        "password": password(name),
        "initial_device_display_name": "e2e",
    }
    return client.call("POST", "/_matrix/client/v3/login", body=body)["access_token"]


def token_works(client, name, token):
    if not token:
        return False
    try:
        me = client.call("GET", "/_matrix/client/v3/account/whoami", token=token)
    except MatrixError:
        return False
    return me.get("user_id") == user_id(name)


def read_env(path):
    env = {}
    try:
        with open(path) as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    env[key] = value
    except FileNotFoundError:
        pass
    return env


def ensure_room(client, tokens):
    alias = f"#{ROOM_ALIAS_NAME}:{SERVER_NAME}"
    quoted = urllib.parse.quote(alias, safe="")
    try:
        room_id = client.call("GET", f"/_matrix/client/v3/directory/room/{quoted}")["room_id"]
    except MatrixError as e:
        if e.status != 404:
            raise
        body = {
            "preset": "public_chat",
            "room_alias_name": ROOM_ALIAS_NAME,
            "name": ROOM_ALIAS_NAME,
        }
        room_id = client.call("POST", "/_matrix/client/v3/createRoom", tokens["alice"], body)["room_id"]
        print(f"created {alias} ({room_id})", file=sys.stderr)
    room = urllib.parse.quote(room_id, safe="")
    # alice created it; if she left since, she joins again (public room)
    client.call("POST", f"/_matrix/client/v3/join/{room}", tokens["alice"], {})

    def membership(name):
        who = urllib.parse.quote(user_id(name), safe="")
        try:
            state = client.call(
                "GET", f"/_matrix/client/v3/rooms/{room}/state/m.room.member/{who}", tokens["alice"]
            )
        except MatrixError as e:
            if e.status == 404:
                return None
            raise
        return state.get("membership")

    def invite(name):
        client.call("POST", f"/_matrix/client/v3/rooms/{room}/invite", tokens["alice"], {"user_id": user_id(name)})

    if membership("bob") != "join":
        if membership("bob") != "invite":
            invite("bob")
        client.call("POST", f"/_matrix/client/v3/join/{room}", tokens["bob"], {})
    if membership("coxswain") not in ("invite", "join"):
        invite("coxswain")
    return alias, room_id


def write_env(path, values):
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w") as f:
        for key, value in values.items():
            f.write(f"{key}={value}\n")
    os.replace(partial, path)


def main():
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--url", required=True, help="homeserver base URL")
    args.add_argument("--secret-file", required=True, help="file holding registration_shared_secret")
    args.add_argument("--env", required=True, help="env file to (re)write")
    opts = args.parse_args()

    with open(opts.secret_file) as f:
        secret = f.read().strip()
    client = Client(opts.url)
    old = read_env(opts.env)
    tokens = {}
    for name in USERS:
        token = old.get(f"MATRIX_{name.upper()}_TOKEN")
        if not token_works(client, name, token):
            register(client, secret, name)
            token = login(client, name)
            print(f"logged in {user_id(name)}", file=sys.stderr)
        tokens[name] = token
    alias, room_id = ensure_room(client, tokens)

    values = {
        "MATRIX_URL": client.url,
        "MATRIX_SERVER_NAME": SERVER_NAME,
        "MATRIX_ROOM_ID": room_id,
        "MATRIX_ROOM_ALIAS": alias,
        "MATRIX_REGISTRATION_SHARED_SECRET": secret,
    }
    for name in USERS:
        upper = name.upper()
        values[f"MATRIX_{upper}_ID"] = user_id(name)
        values[f"MATRIX_{upper}_TOKEN"] = tokens[name]
        values[f"MATRIX_{upper}_PASSWORD"] = password(name)
    write_env(opts.env, values)
    print(f"users {', '.join(user_id(n) for n in USERS)}; room {alias} = {room_id}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except (MatrixError, OSError) as e:
        sys.exit(f"chat/setup: {e}")
