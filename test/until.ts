/**
 * The one bounded wait of the tests: poll a condition until it holds, failing after a time limit. The
 * limit only bounds a failing test; a passing one waits as long as the condition takes.
 */

export interface UntilOptions {
  /** Fail after this long (default 20 s, generous for a loaded machine). */
  readonly timeoutMs?: number;
  /** Pause between checks (default 10 ms). */
  readonly intervalMs?: number;
  /** Named in the error when the condition is not reached. */
  readonly what?: string;
}

/** Resolves once `check` returns (or resolves to) true; rejects when `timeoutMs` has passed first. */
export async function until(
  check: () => boolean | Promise<boolean>,
  { timeoutMs = 20_000, intervalMs = 10, what = 'condition' }: UntilOptions = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
