import type { FieldIssue } from "./errors.ts";
import { INEXACT_NUMBER, inexactNumberReason } from "./exact-json.ts";

/*
 * Guards for JSON that arrives from outside (request bodies, GraphQL variables, update documents), checked
 * once where each surface receives input, before any validator, service or database sees it:
 * - nesting: free-form documents may nest at most {@link MAX_JSON_DEPTH} levels. Deeper values are never
 *   useful to this service, and recursive code further on (schema validators, the database driver, JSON
 *   serialization) would run out of stack on the deepest ones;
 * - text: every string (and object key) must be well-formed Unicode without NUL. A lone UTF-16 surrogate such
 *   as "\ud800" is valid JSON but not text: PostgreSQL refuses it, SQLite stores mojibake, hashes differ. NUL
 *   (U+0000) is valid JSON and Unicode, but PostgreSQL's text and jsonb cannot hold it while SQLite can: refused
 *   everywhere, so that both databases give the same answer;
 * - numbers: a non-zero number that underflowed to 0 when parsed (`1e-400`), which the transports mark as NaN
 *   (underflow-scanner.ts), is refused as INEXACT_NUMBER wherever it is.
 * The same text rule applies to query strings (REST) and string literals (GraphQL): {@link findTextIssue}.
 */

/** How many levels of objects and arrays a JSON input may nest; the input itself is level 1. */
export const MAX_JSON_DEPTH = 32;

/** A JSON object (not null, not an array): what a body, a set of variables or `extensions` must be. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An unpaired surrogate: with the `u` flag, a well-formed pair is one code point and does not match. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/** What is wrong with `text` as text this service stores, or null: NUL (`INVALID_CHARACTER`), a lone surrogate. */
export function findTextIssue(text: string): { code: string; message: string } | null {
  if (text.includes("\u0000")) {
    return { code: "INVALID_CHARACTER", message: "contains a NUL character (U+0000), which text may not contain" };
  }
  if (hasLoneSurrogate(text)) {
    return {
      code: "INVALID_UNICODE",
      message: "contains an unpaired UTF-16 surrogate; text must be well-formed Unicode",
    };
  }
  return null;
}

/**
 * The first problem found in a JSON value, or null: a string that is not well-formed Unicode
 * (`INVALID_UNICODE`) or nesting deeper than {@link MAX_JSON_DEPTH} (`TOO_DEEP`). `path` is where the problem
 * is, below `at`. The walk never goes deeper than the cap, so it is safe on any input.
 */
export function findJsonInputIssue(value: unknown, at: readonly (string | number)[] = []): FieldIssue | null {
  return walk(value, at, 0);
}

/**
 * The first problem in a GraphQL operation's variables (an object of them, or nothing), with a path that
 * starts at the variable's name.
 */
export function findVariablesIssue(variables: Readonly<Record<string, unknown>> | null | undefined): FieldIssue | null {
  if (!variables) return null;
  for (const [name, value] of Object.entries(variables)) {
    // A variable is one level below the variables object: it may nest MAX_JSON_DEPTH levels itself.
    const issue = walk(value, [name], 0);
    if (issue) return issue;
  }
  return null;
}

function walk(value: unknown, path: readonly (string | number)[], depth: number): FieldIssue | null {
  if (typeof value === "string") {
    const issue = findTextIssue(value);
    return issue && { path, ...issue };
  }
  if (typeof value === "number" && Number.isNaN(value)) {
    // A number that underflowed to 0 (underflow-scanner.ts), refused wherever it is, as exact-json.ts refuses it.
    return { path, code: INEXACT_NUMBER, message: `this number ${inexactNumberReason(value)!}` };
  }
  if (value === null || typeof value !== "object") return null;
  if (depth >= MAX_JSON_DEPTH) {
    return { path, code: "TOO_DEEP", message: `JSON may nest at most ${MAX_JSON_DEPTH} levels of objects and arrays` };
  }
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const issue = walk(value[index], [...path, index], depth + 1);
      if (issue) return issue;
    }
    return null;
  }
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    const keyIssue = findTextIssue(key);
    if (keyIssue) return { path: [...path, key], code: keyIssue.code, message: `this key ${keyIssue.message}` };
    const issue = walk(item, [...path, key], depth + 1);
    if (issue) return issue;
  }
  return null;
}
