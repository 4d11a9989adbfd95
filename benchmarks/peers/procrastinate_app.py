"""procrastinate's peer: its app on psycopg, the database from ``DATABASE_URL``."""

import os
import time

from procrastinate import App, PsycopgConnector

from benchmarks.peers.stamps import write_stamp

app = App(connector=PsycopgConnector(conninfo=os.environ["DATABASE_URL"]))


@app.task(queue="bench", name="noop")
def noop(n=0):
    return None


@app.task(queue="bench", name="stamp")
def stamp(n=0):
    write_stamp(n, time.time())
