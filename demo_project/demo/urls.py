from django.urls import path

from demo_project.demo import views

urlpatterns = [path("", views.home, name="home")]
