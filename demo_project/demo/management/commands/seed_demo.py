from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

DEMO_USERS = [
    # username, password, is_staff
    ("admin", "admin", True),
    ("alice", "alice", False),
    ("bob", "bob", False),
]


class Command(BaseCommand):
    help = "Create the demo logins (admin/admin, alice/alice, bob/bob) if they do not exist."

    def handle(self, *args, **options):
        User = get_user_model()
        for username, password, is_staff in DEMO_USERS:
            user, created = User.objects.get_or_create(
                username=username, defaults={"is_staff": is_staff, "is_superuser": is_staff}
            )
            if created:
                user.set_password(password)
                user.save()
        self.stdout.write("Demo logins: " + ", ".join(f"{u}/{p}" for u, p, _ in DEMO_USERS))
