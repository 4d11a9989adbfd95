from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "benchmarks"

    def ready(self):
        from benchmarks import statements

        statements.install()  # only with JOBS_BENCH_STATEMENTS set (benchmarks/transports.py)
