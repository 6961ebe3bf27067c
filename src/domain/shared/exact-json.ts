import type { FieldIssue } from "./errors.ts";

/*
 * Numbers in a JSON document that is stored as sent (an update document). A JSON number is parsed into an IEEE
 * 754 double, and what the double cannot hold is lost without a word: `1e400` becomes Infinity (written back as
 * `null`), `9007199254740993` becomes 9007199254740992. The rule is I-JSON's (RFC 7493, section 2.2): a number
 * must be finite as a double, and a number whose value is an integer must lie within ±(2^53−1), where every
 * integer is exact. A non-zero number that underflows (`1e-400`, parsed as 0) is refused too: the transports find
 * it in the text and hand it on as NaN (underflow-scanner.ts). Anything else is refused, so that what is stored is what was sent; a larger identifier
 * belongs in a string.
 *
 * Fractions are kept as the nearest double and written back in its shortest form (`0.1` stays `0.1`, `1.50`
 * becomes `1.5`): the parsed value no longer shows how many digits were sent, so a fraction with more
 * significant digits than a double holds (about 17) comes back rounded. That is the one loss left, documented
 * in docs/contract.md.
 */

/** The issue code of a number refused by {@link findInexactNumbers}. */
export const INEXACT_NUMBER = "INEXACT_NUMBER";

/** Why `value` (a number from a parsed JSON document) would not be stored as sent, or null when it would. */
export function inexactNumberReason(value: number): string | null {
  // NaN marks a number that underflowed to 0 as parsed (underflow-scanner.ts): JSON.parse never makes NaN.
  if (Number.isNaN(value)) {
    return "is a non-zero number closer to 0 than JSON numbers hold (about ±4.9e-324); send it as a string";
  }
  if (!Number.isFinite(value)) {
    return "is a number beyond what JSON numbers hold (about ±1.8e308); send it as a string";
  }
  if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
    return (
      "is an integer beyond ±9007199254740991 (2^53−1), which JSON numbers do not keep exactly; " +
      "send it as a string"
    );
  }
  return null;
}

/**
 * Every number in `document` that would not be stored as sent, as issues whose paths lead to it (below `at`).
 * The walk keeps its own stack rather than recursing (the transports cap nesting too: json-input.ts).
 */
export function findInexactNumbers(document: unknown, at: readonly (string | number)[] = []): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const pending: { value: unknown; path: readonly (string | number)[] }[] = [{ value: document, path: at }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, path } = next;
    if (typeof value === "number") {
      const reason = inexactNumberReason(value);
      if (reason) {
        issues.push({
          path,
          code: INEXACT_NUMBER,
          message: `this number ${reason}`,
          documentKeys: path.length - at.length,
        });
      }
    } else if (Array.isArray(value)) {
      for (let index = value.length - 1; index >= 0; index--)
        pending.push({ value: value[index], path: [...path, index] });
    } else if (value !== null && typeof value === "object") {
      const entries = Object.entries(value as Record<string, unknown>);
      for (let index = entries.length - 1; index >= 0; index--) {
        const [key, item] = entries[index]!;
        pending.push({ value: item, path: [...path, key] });
      }
    }
  }
  return issues;
}
