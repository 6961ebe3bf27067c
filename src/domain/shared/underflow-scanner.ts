/*
 * Numbers that underflow: a JSON number whose value is not zero but lies closer to zero than the smallest double
 * (about 4.9e-324), such as `1e-400`, parses to 0 with no trace of what was sent. Unlike an overflow (Infinity),
 * the parsed value cannot tell it from a real `0`, so it has to be found in the text itself. The parsed value
 * then carries NaN in its place — a value JSON.parse never produces — and the input guards (json-input.ts) and
 * exact-json.ts refuse NaN as INEXACT_NUMBER, as they refuse what overflowed.
 */

/**
 * An underflow needs a negative exponent or a fraction starting with at least 323 zeros: text with neither (almost
 * every body) is not scanned further.
 */
const MAY_UNDERFLOW = /[eE]-|\.0{300}/;

/** A JSON number token, read from where the scan stands. */
const NUMBER_TOKEN = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

const WHITESPACE = /[ \t\n\r]*/y;

/**
 * The paths of the numbers of `text` (well-formed JSON, already parsed without error) that are not zero as written
 * but parse to zero. Object keys are decoded as JSON.parse decodes them; array items are numbered from 0.
 */
export function findUnderflowedNumbers(text: string): (string | number)[][] {
  if (!MAY_UNDERFLOW.test(text)) return [];
  const found: (string | number)[][] = [];
  // One segment per open object or array: the current key, or the current item's index.
  const path: (string | number)[] = [];
  let index = 0;
  while (index < text.length) {
    const char = text[index]!;
    if (char === "{") {
      path.push("");
      index++;
    } else if (char === "[") {
      path.push(0);
      index++;
    } else if (char === "}" || char === "]") {
      path.pop();
      index++;
    } else if (char === ",") {
      const last = path.length - 1;
      if (typeof path[last] === "number") path[last] += 1;
      index++;
    } else if (char === '"') {
      const end = endOfString(text, index);
      WHITESPACE.lastIndex = end;
      WHITESPACE.exec(text);
      // A string followed by a colon is a key: it names the value that follows.
      if (text[WHITESPACE.lastIndex] === ":") path[path.length - 1] = JSON.parse(text.slice(index, end)) as string;
      index = end;
    } else if (char === "-" || (char >= "0" && char <= "9")) {
      NUMBER_TOKEN.lastIndex = index;
      const token = NUMBER_TOKEN.exec(text)?.[0] ?? char;
      if (Number(token) === 0 && /[1-9]/.test(token.split(/[eE]/)[0]!)) found.push([...path]);
      index += token.length;
    } else {
      index++;
    }
  }
  return found;
}

/** The index just past the closing quote of the string that opens at `start`. */
function endOfString(text: string, start: number): number {
  let index = start + 1;
  while (index < text.length) {
    const char = text[index];
    if (char === "\\") index += 2;
    else if (char === '"') return index + 1;
    else index++;
  }
  return index;
}

/**
 * Puts NaN in `parsed` (JSON.parse's value of `text`) wherever `text` holds a number that underflowed, and returns
 * it (NaN itself when the whole text is such a number). Cheap when nothing underflowed: one regular-expression test.
 */
export function markUnderflowedNumbers(text: string, parsed: unknown): unknown {
  for (const path of findUnderflowedNumbers(text)) {
    if (path.length === 0) return Number.NaN;
    let container: unknown = parsed;
    for (const segment of path.slice(0, -1)) {
      container = ownValue(container, segment);
    }
    const last = path[path.length - 1]!;
    if (typeof ownValue(container, last) === "number")
      (container as Record<string | number, unknown>)[last] = Number.NaN;
  }
  return parsed;
}

function ownValue(container: unknown, segment: string | number): unknown {
  if (container === null || typeof container !== "object") return undefined;
  return Object.hasOwn(container, segment) ? (container as Record<string | number, unknown>)[segment] : undefined;
}
