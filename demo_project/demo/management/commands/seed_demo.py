from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from demo_project.demo.models import Membership, Organisation

DEMO_USERS = [
    # username, password, is_staff, organisation
    ("admin", "admin", True, "Acme Ltd"),
    ("alice", "alice", False, "Acme Ltd"),
    ("bob", "bob", False, "Globex Corporation"),
]


class Command(BaseCommand):
    help = "Create the demo logins (admin/admin, alice/alice, bob/bob) if they do not exist."

    def handle(self, *args, **options):
        User = get_user_model()
        for username, password, is_staff, organisation_name in DEMO_USERS:
            user, created = User.objects.get_or_create(
                username=username,
                defaults={
                    "is_staff": is_staff,
                    "is_superuser": is_staff,
                    "email": f"{username}@example.com",
                },
            )
            if created:
                user.set_password(password)
                user.save()
            organisation, _ = Organisation.objects.get_or_create(name=organisation_name)
            Membership.objects.get_or_create(user=user, defaults={"organisation": organisation})
        self.stdout.write("Demo logins: " + ", ".join(f"{u}/{p}" for u, p, *_ in DEMO_USERS))
