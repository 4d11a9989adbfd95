from django.contrib import admin

from jobs.models import Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "queue", "attempts", "max_attempts", "created_at", "owner"]
    list_filter = ["status", "queue"]
    search_fields = ["=id", "name", "idempotency_key", "summary"]
    show_full_result_count = False
    readonly_fields = [field.name for field in Task._meta.fields]

    def has_add_permission(self, request):
        return False
