/**
 * Runs an assertion and, when it fails, puts `label` at the head of its message: where a loop checks many
 * cases, the label says which one failed. (vitest took it as `expect(value, label)`; jest's `expect` takes no
 * message.)
 */
export function withLabel(label: string, assertion: () => void): void {
  try {
    assertion();
  } catch (error) {
    if (error instanceof Error) {
      const original = error.message;
      error.message = `${label}\n\n${original}`;
      // V8 formats `stack` when it is first read; if that already happened, it still holds the old message.
      if (error.stack && !error.stack.includes(label)) error.stack = error.stack.replace(original, error.message);
    }
    throw error;
  }
}
