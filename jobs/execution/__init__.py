"""Running one task, start to outcome: the executor, the task's context, effects, error records."""
