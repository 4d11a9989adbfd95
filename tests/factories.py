"""Factories for test data; a trait per task status."""

from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.error_records import moment_entry
from jobs.models import Schedule, Task, TaskStep, Worker, Workflow
from jobs.states import Status


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("password")


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Task
        skip_postgeneration_save = True

    name = "tests.testapp.tasks.add"
    payload = factory.LazyFunction(lambda: {"args": [1, 2], "kwargs": {}})
    status = Status.PENDING
    max_attempts = 3

    class Params:
        running = factory.Trait(
            status=Status.RUNNING,
            attempts=1,
            worker_id="test-worker",
            started_at=factory.LazyFunction(timezone.now),
            lease_expires_at=factory.LazyFunction(lambda: timezone.now() + timedelta(minutes=1)),
        )
        succeeded = factory.Trait(
            status=Status.SUCCEEDED,
            attempts=1,
            result=3,
            started_at=factory.LazyFunction(lambda: timezone.now() - timedelta(seconds=2)),
            # Due when it started (not at the row's creation, after it): a run that began before
            # it was due is no real run to the metrics (jobs.metrics.window.ran_in).
            run_after=factory.LazyAttribute(lambda task: task.started_at),
            finished_at=factory.LazyFunction(timezone.now),
        )
        failed = factory.Trait(
            status=Status.FAILED,
            attempts=3,
            last_error="Something went wrong.",
            error_details=factory.LazyFunction(
                lambda: [{"attempt": 3, "exception": "builtins.ValueError", "message": "bad"}]
            ),
            finished_at=factory.LazyFunction(timezone.now),
        )
        retrying = factory.Trait(
            status=Status.RETRYING,
            attempts=1,
            run_after=factory.LazyFunction(lambda: timezone.now() + timedelta(seconds=30)),
        )
        cancelled = factory.Trait(
            status=Status.CANCELLED, finished_at=factory.LazyFunction(timezone.now)
        )
        # A lease that ran out: the worker holding it is gone.
        stale = factory.Trait(
            status=Status.RUNNING,
            attempts=1,
            worker_id="dead-worker",
            lease_expires_at=factory.LazyFunction(lambda: timezone.now() - timedelta(seconds=5)),
        )

    @factory.post_generation
    def steps(task, create, extracted, **kwargs):
        """``steps={"name": result}``: steps recorded for the task (TaskStep rows, in order)."""
        if create and extracted:
            TaskStep.objects.bulk_create(
                TaskStep(task=task, name=name, result=result) for name, result in extracted.items()
            )


class WorkflowFactory(factory.django.DjangoModelFactory):
    """A batch (``kind="chain"`` for a chain); ``members=[status, ...]`` adds a member task in
    each status (``total`` is their number unless given). Traits for its own status."""

    class Meta:
        model = Workflow
        skip_postgeneration_save = True

    kind = Workflow.Kind.BATCH
    summary = factory.Sequence(lambda n: f"Import of {n + 1} files")
    status = Workflow.State.RUNNING

    class Params:
        succeeded = factory.Trait(
            status=Workflow.State.SUCCEEDED, finished_at=factory.LazyFunction(timezone.now)
        )
        failed = factory.Trait(
            status=Workflow.State.FAILED, finished_at=factory.LazyFunction(timezone.now)
        )
        cancelled = factory.Trait(
            status=Workflow.State.CANCELLED, finished_at=factory.LazyFunction(timezone.now)
        )

    @factory.post_generation
    def members(workflow, create, extracted, **kwargs):
        if not (create and extracted):
            return
        for number, status in enumerate(extracted):
            traited = status in ("running", "succeeded", "failed", "retrying", "cancelled")
            traits = {status: True} if traited else {"status": status}
            TaskFactory(
                workflow=workflow,
                workflow_role="member",
                owner=workflow.owner,
                summary=f"file{number + 1}.csv",
                **traits,
            )
        if not workflow.total:
            workflow.total = len(extracted)
            workflow.save(update_fields=["total"])


class ErrorEntryFactory(factory.DictFactory):
    """One entry of ``Task.error_details``, as ``jobs.error_records`` writes it; ``at`` is a
    datetime given as ``when`` (now unless given)."""

    class Params:
        when = factory.LazyFunction(timezone.now)

    attempt = 1
    at = factory.LazyAttribute(lambda entry: moment_entry(entry.when))
    worker_id = "host:1:abc"
    exception = "builtins.ValueError"
    message = "bad value"
    traceback = factory.LazyAttribute(
        lambda entry: (
            f"Traceback (most recent call last):\n  {entry.origin}\n"
            f"{entry.exception}: {entry.message}\n"
        )
    )
    user_message = "Something went wrong."
    transient = False
    permanent = False
    origin = "app/tasks.py:42 in run"


class WorkerFactory(factory.django.DjangoModelFactory):
    """A worker's heartbeat row; alive unless ``stopped`` or ``silent``."""

    class Meta:
        model = Worker

    id = factory.Sequence(lambda n: f"host:{1000 + n}:abc{n:03d}")
    hostname = "host"
    pid = factory.Sequence(lambda n: 1000 + n)
    concurrency = 4
    started_at = factory.LazyFunction(lambda: timezone.now() - timedelta(minutes=10))
    last_heartbeat_at = factory.LazyFunction(timezone.now)

    class Params:
        stopped = factory.Trait(stopped_at=factory.LazyFunction(timezone.now))
        # Stopped beating without saying so: killed.
        silent = factory.Trait(
            last_heartbeat_at=factory.LazyFunction(lambda: timezone.now() - timedelta(hours=1))
        )


class ScheduleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Schedule

    name = factory.Sequence(lambda n: f"schedule{n}")
    task = "tests.testapp.tasks.add"
    cron = "*/5 * * * *"


class OrganisationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "demo.Organisation"

    name = factory.Sequence(lambda n: f"Organisation {n}")


class MemberFactory(UserFactory):
    """A demo user who works for an organisation."""

    class Meta:
        skip_postgeneration_save = True

    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    membership = factory.RelatedFactory(
        "tests.factories.MembershipFactory", factory_related_name="user"
    )


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "demo.Membership"

    user = factory.SubFactory(UserFactory)
    organisation = factory.SubFactory(OrganisationFactory)


class UploadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "demo.Upload"

    owner = factory.SubFactory(MemberFactory)
    organisation = factory.LazyAttribute(lambda upload: upload.owner.membership.organisation)
    filename = "contacts.csv"
    content_type = "text/csv"
    file = factory.django.FileField(
        filename="contacts.csv", data=b"email,name\nada@example.com,Ada\n"
    )
