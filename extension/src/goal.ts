// The optimization goal the user types ("faster", "fit in 40 GiB", …), checked before it is sent.

export const DEFAULT_GOAL = "faster";
/** Long enough for a sentence; longer text is almost always a paste by mistake. */
export const MAX_GOAL_LENGTH = 200;

export type GoalCheck = { ok: true; goal: string } | { ok: false; message: string };

// Control characters other than whitespace would reach the server's logs and git commit messages.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

/** Trims, folds runs of whitespace (newlines included) into one space; empty means the default. */
export function normalizeGoal(raw: string): GoalCheck {
  if (CONTROL.test(raw)) {
    return { ok: false, message: "The goal contains control characters." };
  }
  const goal = raw.trim().replace(/\s+/g, " ");
  if (goal.length === 0) {
    return { ok: true, goal: DEFAULT_GOAL };
  }
  if (goal.length > MAX_GOAL_LENGTH) {
    return {
      ok: false,
      message: `The goal is ${goal.length} characters; keep it under ${MAX_GOAL_LENGTH + 1}.`,
    };
  }
  return { ok: true, goal };
}

/** In the shape an input box's `validateInput` wants: a message, or undefined when acceptable. */
export function goalInputError(raw: string): string | undefined {
  const check = normalizeGoal(raw);
  return check.ok ? undefined : check.message;
}
