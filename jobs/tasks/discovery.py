"""Importing the ``tasks`` modules of installed apps when a worker starts, whatever they raise.

Django's ``autodiscover_modules`` lets an import error through: one app's broken ``tasks.py``
(a missing dependency, a ``SystemExit`` at import) would stop the whole worker, and every other
app's tasks with it. Here the error is logged once, with its traceback, and the worker serves
on; the tasks of that module fail with the import's own error when claimed (the executor
imports the module again to find it, see ``jobs.execution.executor._import_failure``).
"""

import logging
from importlib import import_module

from django.apps import apps
from django.utils.module_loading import module_has_submodule

logger = logging.getLogger(__name__)


def discover_task_modules() -> list[str]:
    """Import ``<app>.tasks`` of every installed app that has one; return those that failed."""
    failed = []
    for app_config in apps.get_app_configs():
        name = f"{app_config.name}.tasks"
        try:
            import_module(name)
        except BaseException as exc:  # SystemExit too: it is the module's error, not a stop
            if not _has_tasks_module(app_config):
                continue  # no tasks module in that app: nothing to discover
            failed.append(name)
            logger.error(
                "task module failed to import, its tasks will fail when claimed module=%s error=%s",
                name,
                type(exc).__qualname__,
                exc_info=True,
            )
    return failed


def _has_tasks_module(app_config) -> bool:
    try:
        return module_has_submodule(app_config.module, "tasks")
    except BaseException:
        return True
