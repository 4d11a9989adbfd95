"""Workflows on the task record: dependencies, chains, and batches with callbacks.

The three shapes (docs/howto/workflows.md)::

    report.using(depends_on=[fetch_a, fetch_b], on_dependency_failure="cancel").enqueue()
    jobs.chain(download.s(url), parse.s(), store.s())          # each gets the previous result
    jobs.batch([import_file.s(f) for f in files], on_success=mail_done.s(), on_failure=...)

A task waiting for others is ``blocked`` (no claim index holds it). The transaction that records
an outcome also releases or cancels what waited for it, and completes its workflow
(``jobs.workflows.settling``), so a worker killed at any instant leaves nothing half-done.
"""

from jobs.workflows.api import batch, cancel_workflow, chain, retry_workflow
from jobs.workflows.progress import Progress, progress

workflow_progress = progress  # as ``jobs.workflow_progress``

__all__ = [
    "Progress", "batch", "cancel_workflow", "chain", "progress", "retry_workflow",
    "workflow_progress",
]  # fmt: skip
