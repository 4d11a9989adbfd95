"""How ``benchmarks/lock_waits.py`` names and counts the lock waits it sampled."""

import json

from benchmarks import lock_waits

CLAIM = "\n        WITH RECURSIVE heads(claim_key, id, concurrency_limit) AS ( (SELECT ..."
RENEWAL = 'UPDATE "jobs_task" SET "lease_expires_at" = \'2026-12-03\'::timestamptz WHERE ...'
SUCCEED = "WITH v(id, attempts) AS (SELECT ... FROM jsonb_array_elements('[[...]]') AS e) ..."


def wait(sample, pid, query, lock="transactionid", blockers=()):
    blocking = [{"pid": 9, "state": "idle in transaction", "query": q} for q in blockers]
    return {"sample": sample, "pid": pid, "wait_event": lock, "query": query, "xid": None,
            "blockers": blocking}  # fmt: skip


def test_statements_are_named_and_the_claim_is_told_apart():
    assert lock_waits.statement(CLAIM) == "claim"
    assert lock_waits.kind(CLAIM) == "claim"
    assert lock_waits.statement(RENEWAL) == "lease renewal"
    assert lock_waits.kind(RENEWAL) == "other"
    assert lock_waits.kind(SUCCEED) == "outcome"
    assert lock_waits.statement("  RELEASE SAVEPOINT s1_x1") == "RELEASE SAVEPOINT"
    assert lock_waits.statement(None) == ""
    assert lock_waits.statement("SELECT   1\n  FROM x") == "SELECT 1 FROM x"


def test_a_wait_seen_in_consecutive_samples_counts_once(tmp_path):
    out = tmp_path / "waits.jsonl"
    rows = [
        wait(3, 10, RENEWAL, blockers=[CLAIM]),
        wait(4, 10, RENEWAL, blockers=[CLAIM]),  # the same wait, still on
        wait(9, 10, RENEWAL, blockers=[CLAIM]),  # a wait of its own, later
        wait(9, 11, CLAIM, lock="extend", blockers=[SUCCEED, SUCCEED]),
        {"samples": 12},
    ]
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))

    summary = lock_waits.summarize(out)

    assert summary["samples"] == 12
    assert summary["waits"] == [
        {"kind": "claim", "lock": "extend", "waiting": "claim", "blocking": "outcome write",
         "waits": 1, "samples": 1},
        {"kind": "other", "lock": "transactionid", "waiting": "lease renewal",
         "blocking": "claim", "waits": 2, "samples": 3},
    ]  # fmt: skip


def test_no_wait_seen(tmp_path):
    out = tmp_path / "waits.jsonl"
    out.write_text(json.dumps({"samples": 5}) + "\n")
    assert lock_waits.summarize(out) == {"samples": 5, "waits": []}
