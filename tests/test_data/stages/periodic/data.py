"""The paced job's data side: the loss curve it reports.

Not a model or training-loop file, so `infrarsi init` locks it (hashed, outside the editable
scope): the tests edit it to check that every stage refuses a changed locked file.
"""


def loss_at(step: int) -> float:
    return 4.0 * 0.95**step
