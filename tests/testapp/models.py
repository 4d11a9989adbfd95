from django.db import models


class SideEffect(models.Model):
    """One row per effect a test task had, so tests can count how often work really happened."""

    key = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.key
