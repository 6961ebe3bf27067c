/**
 * Reads a value until an assertion on it passes, for state that settles on its own (a browser's editor, a
 * debounced validator). Jest has no `expect.poll`, so this is its equivalent: it reads every 50 ms and, on
 * timeout, throws the assertion's own error from the last read, so the failure shows what was seen. The default
 * deadline (10 s) is generous: it only bounds a failing wait, and a busy machine may take a while to settle.
 */
export async function expectEventually<T>(
  read: () => T | Promise<T>,
  assertion: (value: T) => void,
  { timeoutMs = 10_000, intervalMs = 50 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    try {
      assertion(value);
      return;
    } catch (error) {
      if (Date.now() >= deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
