"""The workflow API in plain Python: what ``depends_on`` takes, calls (``task.s``), and the
words of a workflow's progress."""

import uuid
from types import SimpleNamespace

import pytest

from jobs.exceptions import PayloadError
from jobs.tasks.definition import Call, TaskOptionError
from jobs.tasks.dependencies import MAX_DEPENDENCIES, dependency_ids
from jobs.workflows.progress import Progress, wording
from tests.testapp import django_tasks
from tests.testapp import workflow_tasks as wt


def test_depends_on_takes_rows_ids_and_results_as_ids_each_once():
    one, two = uuid.uuid4(), uuid.uuid4()
    row = SimpleNamespace(pk=one)
    result = SimpleNamespace(id=str(two))  # a Django TaskResult's id is text
    assert dependency_ids([row, result, one, str(two)]) == (one, two)
    assert dependency_ids(row) == (one,)
    assert dependency_ids(None) == ()


@pytest.mark.parametrize("value", ["nope", 12, 3.5, True, object(), [None]])
def test_depends_on_refuses_what_is_no_task(value):
    with pytest.raises((TypeError, ValueError)):
        dependency_ids(value if isinstance(value, list) else [value])


def test_depends_on_refuses_too_many():
    with pytest.raises(ValueError, match=r"jobs\.batch"):
        dependency_ids([uuid.uuid4() for _ in range(MAX_DEPENDENCIES + 1)])


def test_using_sets_dependencies_and_their_policy_through_both_decorators():
    one = uuid.uuid4()
    for task in (wt.mark, django_tasks.django_double):
        waiting = task.using(depends_on=[one], on_dependency_failure="run")
        assert waiting.depends_on == (one,)
        assert waiting.on_dependency_failure == "run"
        assert task.depends_on == ()  # the declaration is untouched
        assert waiting.using(priority=3).depends_on == (one,)  # kept by later options


@pytest.mark.parametrize("policy", ["ignore", "", 1, None.__class__])
def test_an_unknown_policy_is_refused_as_a_task_option(policy):
    with pytest.raises(TaskOptionError, match="on_dependency_failure"):
        wt.mark.using(on_dependency_failure=policy)


def test_a_call_is_a_task_with_its_arguments():
    call = wt.mark.s("key", 1, extra=2)
    assert call == Call(wt.mark, ("key", 1), {"extra": 2}, receives=True)
    assert wt.mark.si("key").receives is False
    assert call.using(priority=7).task.priority == 7
    assert django_tasks.django_double.s(2).task is django_tasks.django_double
    with pytest.raises(TaskOptionError):
        Call(lambda: None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("progress", "text", "percent"),
    [
        (Progress(total=10, succeeded=6, failed=1, running=3), "7 of 10 done, 1 failed", 70),
        (
            Progress(total=3, succeeded=1, failed=1, cancelled=1),
            "3 of 3 done, 1 failed, 1 cancelled",
            100,
        ),
        (Progress(total=0), "0 of 0 done", 100),
        (Progress(total=10_000, succeeded=1234), "1,234 of 10,000 done", 12),
    ],
)
def test_progress_in_words(progress, text, percent):
    assert progress.text == text
    assert progress.percent == percent
    assert progress.as_dict()["text"] == text
    assert progress.finished is (progress.done == progress.total)


FILES = {"noun": "file", "noun_plural": "files", "verb": "imported"}


@pytest.mark.parametrize(
    ("progress", "text"),
    [
        (Progress(total=10, succeeded=7, failed=1, **FILES), "7 of 10 files imported, 1 failed"),
        (Progress(total=10, succeeded=9, failed=1, **FILES), "9 of 10 files imported, 1 failed"),
        (
            Progress(total=10, succeeded=9, failed=1, noun="file", noun_plural="files"),
            "10 of 10 files done, 1 failed",  # "done": every finished member
        ),
        (Progress(total=1, succeeded=1, **FILES), "1 of 1 file imported"),
        (Progress(total=1, **FILES), "0 of 1 file imported"),
        (Progress(total=2, succeeded=1, **FILES), "1 of 2 files imported"),
        (Progress(total=0, **FILES), "0 of 0 files imported"),
        (Progress(total=3, succeeded=3, verb="sent"), "3 of 3 sent"),
        (
            Progress(total=2, cancelled=1, noun="child", noun_plural="children", verb="fed"),
            "0 of 2 children fed, 1 cancelled",
        ),
    ],
)
def test_a_workflow_names_its_members_in_the_number_of_the_total(progress, text):
    assert progress.text == text
    assert progress.as_dict()["text"] == text


def test_wording_adds_an_s_takes_a_pair_and_defaults_to_done():
    assert wording() == ("", "", "done")
    assert wording("file", "imported") == ("file", "files", "imported")
    assert wording(("child", "children"), " fed ") == ("child", "children", "fed")
    assert wording("", "sent") == ("", "", "sent")


@pytest.mark.parametrize(
    ("noun", "verb", "says"),
    [
        ("fi\x00le", None, "character '\\x00'"),
        ("file", "im\ud800ported", "character '\\ud800'"),
        ("file", "imported\nnow", "character '\\n'"),
        ("f" * 41, None, "41 characters long; at most 40"),
        ("file", "v" * 1000, "1,000 characters long"),
        ("file", "", "verb of a workflow's progress cannot be empty"),
        ("file", "   ", "cannot be empty"),
        (7, None, "noun must be text"),
        (("file",), None, "noun must be text"),
        (("child", None), None, "plural noun of a workflow's progress must be text"),
        ("file", b"imported", "verb of a workflow's progress must be text"),
        ("x" * 40, None, "41 characters long"),  # its plural, an "s" added
    ],
)
def test_a_bad_noun_or_verb_is_refused_with_the_reason(noun, verb, says):
    with pytest.raises(PayloadError) as refused:
        wording(noun, verb)
    assert says in str(refused.value)


def test_a_batch_takes_any_iterable_of_calls_and_says_so_of_one_call():
    # batch(call for ...) and batch(task.s(1)) raised "object of type ... has no len()".
    from jobs.exceptions import PayloadError
    from jobs.workflows.api import _calls

    calls = [wt.mark.s(number) for number in range(3)]
    assert _calls(iter(calls), "batch") == calls
    assert _calls((call for call in calls), "batch") == calls
    with pytest.raises(PayloadError, match=r"takes a list of task calls"):
        _calls(calls[0], "batch")
    with pytest.raises(PayloadError, match=r"takes task calls"):
        _calls(5, "batch")
