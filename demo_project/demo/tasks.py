"""Tasks of the demo product."""

import math

from jobs import PermanentError, task


@task(takes_context=True, max_attempts=3)
def count_primes(context, limit: int):
    """Count the primes below ``limit``, reporting progress as it goes."""
    if not isinstance(limit, int) or limit < 2 or limit > 5_000_000:
        raise PermanentError("Please choose a number between 2 and 5,000,000.")
    found = 0
    step = max(1, limit // 100)
    for number in range(2, limit):
        if all(number % d for d in range(2, math.isqrt(number) + 1)):
            found += 1
        if number % step == 0:
            context.progress(number, limit, f"Checked {number:,} of {limit:,} numbers")
    context.progress(limit, limit, f"Checked {limit:,} of {limit:,} numbers", force=True)
    return {"limit": limit, "primes": found}
