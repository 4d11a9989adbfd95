"""The peers that ``benchmarks/peers.py`` compares jobs with, each set up as its docs say.

Each peer runs in a virtualenv of its own under ``var/peers/`` (made by ``benchmarks/peers.py``)
with a module of its own here: ``dtdb_settings`` (django-tasks-db, a small Django project),
``procrastinate_app``, ``celery_app``; ``plain_worker`` is the reference, a plain psycopg worker.
``drive`` runs one measurement of one kind inside that kind's virtualenv.
"""
