from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from demo_project.demo.forms import PrimeForm
from demo_project.demo.tasks import count_primes
from jobs.models import Task


@login_required
def home(request):
    form = PrimeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        limit = form.cleaned_data["limit"]
        task = count_primes.using(owner=request.user, summary=f"Primes below {limit:,}").enqueue(
            limit
        )
        messages.success(request, f"Started: {task.summary}.")
        return redirect("home")
    tasks = Task.objects.owned_by(request.user)[:20]
    return render(request, "demo/home.html", {"form": form, "tasks": tasks})
